"""The alignment export of a checkpoint: read its attention as word alignment on a split (or two
files), forced on the given target or on the model's own translation, optionally combined with a
reverse-direction model's, score it against a reference (gold alignments, or else the statistical
aligner's links, with the diagonal baseline beside it), and write the files of
`nmt.alignment.report`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import datasets
import torch

from nmt.alignment.aer import alignment_error_rate, monotonicity
from nmt.alignment.aligner import aligner_links
from nmt.alignment.extract import forced_alignments, free_alignments
from nmt.alignment.pharaoh import Link, read_pharaoh
from nmt.alignment.report import write_export
from nmt.alignment.symmetrize import symmetrize
from nmt.alignment.words import SentenceAlignment, diagonal_links, word_links
from nmt.checkpoint import checkpoint_path, load_model
from nmt.command_config import AlignConfig, Reference
from nmt.config import Config
from nmt.data.corpus import gold_alignment_file, load_parallel_files, load_split, split_prefix
from nmt.data.prepare import encode_pairs
from nmt.decoding import fit_sources
from nmt.errors import UserError
from nmt.files import atomic_output, atomic_write_text
from nmt.runtime import resolve_device

GoldLinks = list[tuple[set[Link], set[Link]]]


@dataclass
class ReferenceLinks:
    """What the links are scored against: `kind` is "gold" or "eflomal-gdfa" (an aligner's links:
    agreement with it, not accuracy)."""

    kind: str
    path: Path
    links: GoldLinks


def find_reference(cfg: AlignConfig, run_cfg: Config, split: str | None) -> ReferenceLinks | None:
    """`align.reference`: auto = an explicit or the split's gold file, else the aligner's cached
    grow-diag-final-and links of the split, else nothing."""
    opts, kind = cfg.align, cfg.align.reference
    gold = Path(opts.gold) if opts.gold else gold_alignment_file(run_cfg.data, split) if split else None
    if kind in (Reference.auto, Reference.gold) and gold is not None:
        return ReferenceLinks("gold", gold, read_pharaoh(gold, opts.gold_one_based))
    if kind == Reference.gold:
        raise UserError("align.reference=gold: no gold alignments (give align.gold=FILE, or a split with {prefix}.gold)")
    found = aligner_links(run_cfg.data, split) if split and kind in (Reference.auto, Reference.aligner) else None
    if found is not None:
        return ReferenceLinks("eflomal-gdfa", found, read_pharaoh(found))
    if kind == Reference.aligner:
        raise UserError("align.reference=aligner: no aligner links for this split; run `make aligner` (python -m nmt.aligner) first")
    return None


def scores_against(reference: ReferenceLinks, links: list[list[Link]], alignments: list[SentenceAlignment]) -> dict[str, Any]:
    """Precision, recall and AER of `links`, with the diagonal baseline's on the same sentences."""
    if len(reference.links) != len(links):
        raise UserError(f"{reference.path}: {len(reference.links)} lines of reference links for {len(links)} sentence pairs")
    own = alignment_error_rate(links, reference.links)
    diagonal = alignment_error_rate(diagonal_links(alignments), reference.links)
    return {"reference": reference.kind, "reference_file": str(reference.path), **asdict(own),
            "diagonal": {k: v for k, v in asdict(diagonal).items() if k != "sentences"}}


def reverse_direction(cfg: AlignConfig, sources: list[str], targets: list[str], device: torch.device) -> list[set[Link]]:
    """The links of `align.reverse_ckpt` (a target->source model), forced on (target, source),
    turned back into (source word, target word)."""
    assert cfg.align.reverse_ckpt is not None
    model, _, src_tok, tgt_tok = load_model(cfg.align.reverse_ckpt, device)
    swapped = datasets.Dataset.from_dict({"src": targets, "tgt": sources})
    key = f"reverse-{Path(cfg.align.reverse_ckpt).stat().st_mtime_ns}-{len(sources)}"
    ds = fit_sources(encode_pairs(swapped, src_tok, tgt_tok, key), model, key, "reverse")
    reverse = forced_alignments(model, ds, src_tok, tgt_tok, cfg.decode.batch_tokens, device)
    return [{(i, j) for j, i in links} for links in word_links(reverse, cfg.align.threshold)]


def export_alignments(cfg: AlignConfig) -> dict[str, Any]:
    """Export the alignments of a checkpoint into `cfg.align.out` (default `align-{data}` beside the
    checkpoint) -> the scores written to scores.json (with `out`: the folder)."""
    opts = cfg.align
    ckpt = checkpoint_path(cfg.ckpt, cfg.runs_dir)
    device = resolve_device(cfg.device)
    model, run_cfg, src_tok, tgt_tok = load_model(ckpt, device)
    split = None if opts.src and opts.tgt else cfg.split
    raw = load_parallel_files(Path(opts.src), Path(opts.tgt)) if opts.src and opts.tgt else load_split(run_cfg.data, cfg.split)
    name = Path(split_prefix(run_cfg.data, cfg.split)).name if split is not None else Path(str(opts.src)).stem
    key = f"align-{ckpt.stat().st_mtime_ns}-{name}-{len(raw)}"
    ds = fit_sources(encode_pairs(raw, src_tok, tgt_tok, key), model, key, name)
    if opts.forced:
        alignments, targets = forced_alignments(model, ds, src_tok, tgt_tok, cfg.decode.batch_tokens, device), list(raw["tgt"])
    else:
        alignments, targets = free_alignments(model, ds, src_tok, tgt_tok, cfg.decode, device)
    directions = {"forward": word_links(alignments, opts.threshold)}
    if opts.reverse_ckpt:
        directions["reverse"] = [sorted(s, key=lambda link: (link[1], link[0])) for s in
                                 reverse_direction(cfg, list(raw["src"]), targets, device)]
        directions[opts.symmetrize.value] = symmetrize([set(s) for s in directions["forward"]],
                                                       [set(s) for s in directions["reverse"]], opts.symmetrize.value)
    links = directions[opts.symmetrize.value if opts.reverse_ckpt else "forward"]
    scores: dict[str, Any] = {"checkpoint": str(ckpt), "data": name, "sentences": len(alignments), "forced": opts.forced,
                              "threshold": opts.threshold, "links": opts.symmetrize.value if opts.reverse_ckpt else "forward",
                              "kendall_tau": monotonicity(links)}
    reference = find_reference(cfg, run_cfg, split)
    if reference is not None:
        scores.update(scores_against(reference, links, alignments))
        if opts.reverse_ckpt:
            scores["directions"] = {
                direction: {k: v for k, v in asdict(alignment_error_rate(found, reference.links)).items() if k != "sentences"}
                for direction, found in directions.items()
            }
    out = Path(opts.out) if opts.out else ckpt.parent / f"align-{name}"
    write_export(out, alignments, links, list(raw["src"]), targets, opts.heatmaps, scores, f"Alignments: {name} ({ckpt})")
    if opts.reverse_ckpt:
        for direction in ("forward", "reverse"):
            with atomic_output(out / f"alignments.{direction}.pharaoh") as f:
                f.write("".join(" ".join(f"{i}-{j}" for i, j in s) + "\n" for s in directions[direction]))
    atomic_write_text(out / "scores.json", json.dumps(scores, indent=2) + "\n")
    return {**scores, "out": str(out)}
