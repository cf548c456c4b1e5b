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
from nmt.alignment.eflomal import aligner_links
from nmt.alignment.extract import forced_alignments, free_alignments
from nmt.alignment.pharaoh import Link, read_pharaoh
from nmt.alignment.report import write_export
from nmt.alignment.symmetrize import symmetrize
from nmt.alignment.words import SentenceAlignment, diagonal_links, word_links
from nmt.config.commands import AlignConfig, Reference
from nmt.config.schema import Config
from nmt.data.corpus import gold_alignment_file, load_parallel_files, load_split, split_prefix
from nmt.data.prepare import encode_pairs
from nmt.decoding.splits import fit_sources
from nmt.model.checkpoint import checkpoint_path, load_model
from nmt.model.ensemble import DecodingModel, Ensemble
from nmt.system.errors import UserError
from nmt.system.files import atomic_output, atomic_write_text
from nmt.system.runtime import resolve_device

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
        raise UserError("align.reference=aligner: no aligner links for this split; "
                        "run `make aligner` (python -m nmt.reference_aligner) first")
    return None


def scores_against(reference: ReferenceLinks, links: list[list[Link]], alignments: list[SentenceAlignment]) -> dict[str, Any]:
    """Precision, recall and AER of `links`, with the diagonal baseline's on the same sentences."""
    if len(reference.links) != len(links):
        raise UserError(f"{reference.path}: {len(reference.links)} lines of reference links for {len(links)} sentence pairs")
    own = alignment_error_rate(links, reference.links)
    diagonal = alignment_error_rate(diagonal_links(alignments), reference.links)
    return {"reference": reference.kind, "reference_file": str(reference.path), **asdict(own),
            "diagonal": {k: v for k, v in asdict(diagonal).items() if k != "sentences"}}


def whose_attention(model: DecodingModel, member: str, path: Path) -> tuple[DecodingModel, str]:
    """The model whose attention is read, and what it is in words: a single model's checkpoint is
    its model; of an ensemble's, model `member` or (`mean`) the ensemble, whose attention is the
    mean of its models' (no model computed its context from that mean)."""
    if not isinstance(model, Ensemble):
        if member not in ("0", "mean"):
            raise UserError(f"align.member={member}: {path} holds one model, not an ensemble")
        return model, "the model's own"
    size = len(model.members)
    if member == "mean":
        return model, f"the mean of the {size} models of an ensemble"
    if int(member) >= size:
        raise UserError(f"align.member={member}: {path} holds an ensemble of {size} models (0 to {size - 1})")
    return model.members[int(member)], f"model {member} of an ensemble of {size}"


def reverse_direction(cfg: AlignConfig, sources: list[str], targets: list[str], device: torch.device) -> list[set[Link]]:
    """The links of `align.reverse_ckpt` (a target->source model), forced on (target, source),
    turned back into (source word, target word)."""
    assert cfg.align.reverse_ckpt is not None
    loaded, _, src_tok, tgt_tok = load_model(cfg.align.reverse_ckpt, device)
    model, _ = whose_attention(loaded, cfg.align.member, Path(cfg.align.reverse_ckpt))
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
    loaded, run_cfg, src_tok, tgt_tok = load_model(ckpt, device)
    model, attention = whose_attention(loaded, opts.member, ckpt)
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
    scores: dict[str, Any] = {"checkpoint": str(ckpt), "attention": attention, "data": name, "sentences": len(alignments),
                              "forced": opts.forced,
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
    title = f"Alignments: {name} ({ckpt}; {attention} attention)"
    write_export(out, alignments, links, list(raw["src"]), targets, opts.heatmaps, scores, title)
    if opts.reverse_ckpt:
        for direction in ("forward", "reverse"):
            with atomic_output(out / f"alignments.{direction}.pharaoh") as f:
                f.write("".join(" ".join(f"{i}-{j}" for i, j in s) + "\n" for s in directions[direction]))
    atomic_write_text(out / "scores.json", json.dumps(scores, indent=2) + "\n")
    return {**scores, "out": str(out)}
