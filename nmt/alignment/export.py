"""The alignment export of a checkpoint: read its attention as word alignment on a split (or two
files), forced on the given target or on the model's own translation, optionally combined with a
reverse-direction model's, score it against a reference (gold alignments, or else the statistical
aligner's links, with the diagonal baseline beside it), and write the files of
`nmt.alignment.report`."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import datasets
import torch

from nmt.alignment.adapt import AdaptBudget, adapt
from nmt.alignment.aer import alignment_error_rate, monotonicity
from nmt.alignment.eflomal import INSTALL, align_pairs, aligner_links
from nmt.alignment.explorer_page import explorer_data, write_explorer
from nmt.alignment.extract import forced_alignments, free_alignments
from nmt.alignment.pharaoh import Link, format_links, read_pharaoh
from nmt.alignment.report import write_export
from nmt.alignment.symmetrize import symmetrize
from nmt.alignment.words import LinkRule, SentenceAlignment, diagonal_links, word_links
from nmt.config.commands import AdaptOptions, AlignConfig, AlignOptions, Reference, Symmetrize
from nmt.config.schema import Config
from nmt.data.corpus import gold_alignment_file, load_parallel_files, load_split, split_prefix
from nmt.data.prepare import encode_pairs
from nmt.data.tokenizer import Tokenizer
from nmt.decoding.splits import fit_sources
from nmt.model.checkpoint import checkpoint_path, load_model
from nmt.model.ensemble import DecodingModel, Ensemble
from nmt.model.seq2seq import Seq2Seq
from nmt.system.errors import UserError
from nmt.system.files import atomic_output, atomic_write_text
from nmt.system.runtime import resolve_device

log = logging.getLogger(__name__)
GoldLinks = list[tuple[set[Link], set[Link]]]
Loaded = tuple[DecodingModel, Config, Tokenizer, Tokenizer]  # what load_model returns


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


def link_rule(opts: AlignOptions) -> LinkRule:
    """The `align.*` settings that say how links are read from attention."""
    return LinkRule(opts.merge.value, opts.shift, opts.threshold, opts.cover_source)


def pairs_links(cfg: AlignConfig, raw: datasets.Dataset, targets: list[str], yardstick: bool) -> dict[str, list[set[Link]]] | None:
    """eflomal's links of the pairs being aligned, when they are wanted (to guide an adaptation, or
    as the yardstick beside gold, `yardstick`) and eflomal is installed; else None."""
    guided = adapting(cfg.align.adapt) and cfg.align.adapt.guide_weight > 0
    if not (guided or yardstick):
        return None
    try:
        return align_pairs(list(raw["src"]), targets)
    except UserError:  # not installed
        if guided:
            log.warning("%s: adapting on the translation loss alone", INSTALL)
        return None


def adapting(opts: AdaptOptions) -> bool:
    return bool(opts.steps or opts.minutes)


def read_direction(
    cfg: AlignConfig, loaded: Loaded, path: Path, sources: list[str], targets: list[str], guide: list[set[Link]] | None,
    device: torch.device, what: str,
) -> tuple[list[SentenceAlignment], dict[str, Any]]:
    """The forced alignments of a checkpoint's model (`loaded` from `path`) on (sources, targets),
    after adapting it to them when `align.adapt` asks (toward `guide`, the aligner's links of these
    pairs in this direction) -> (alignments, what the adaptation did: {} without one)."""
    decoding, run_cfg, src_tok, tgt_tok = loaded
    model, _ = whose_attention(decoding, cfg.align.member, path)
    raw = datasets.Dataset.from_dict({"src": sources, "tgt": targets})
    pairs = hashlib.sha1("\n".join(sources + targets).encode()).hexdigest()[:16]
    key = f"align-{path.stat().st_mtime_ns}-{pairs}"  # (datasets' fingerprints: at most 64 characters)
    ds = fit_sources(encode_pairs(raw, src_tok, tgt_tok, key), model, key, what)
    adaptation: dict[str, Any] = {}
    opts = cfg.align.adapt
    if adapting(opts):
        assert isinstance(model, Seq2Seq)  # (check_align refuses to adapt an ensemble's mean)
        budget = AdaptBudget(opts.steps, opts.minutes, opts.lr, opts.guide_weight, run_cfg.train.label_smoothing,
                             opts.batch_tokens or run_cfg.data.batch_tokens, opts.seed)
        done = adapt(model, ds, src_tok, tgt_tok, guide, budget, device)
        model = done.model
        adaptation = {"steps": done.steps, "seconds": round(done.seconds, 1), "loss": round(done.loss, 4),
                      "guided_loss": round(done.guided, 4) if guide is not None and opts.guide_weight else None}
        log.info("%s: adapted %s for %d steps (%.0f s): loss %.3f per token", what, path, done.steps, done.seconds, done.loss)
    return forced_alignments(model, ds, src_tok, tgt_tok, cfg.decode.batch_tokens, device), adaptation


def add_reverse(
    cfg: AlignConfig, methods: dict[str, list[list[Link]]], sources: list[str], targets: list[str],
    guide: list[set[Link]] | None, device: torch.device, what: str,
) -> dict[str, Any]:
    """Add to `methods` (which holds "forward") the links of `align.reverse_ckpt`, forced on
    (target, source) and turned back into (source word, target word), and every symmetrisation of
    the two -> what the reverse model's adaptation did."""
    path = Path(str(cfg.align.reverse_ckpt))
    reverse, adaptation = read_direction(cfg, load_model(path, device), path, targets, sources, guide, device, what)
    methods["reverse"] = [sorted(((i, j) for j, i in links), key=lambda link: (link[1], link[0]))
                          for links in word_links(reverse, rule=link_rule(cfg.align))]
    forward, backward = [set(s) for s in methods["forward"]], [set(s) for s in methods["reverse"]]
    for symmetric in Symmetrize:
        methods[symmetric.value] = symmetrize(forward, backward, symmetric.value)
    return adaptation


def scored(links: dict[str, list[list[Link]]], reference: ReferenceLinks) -> dict[str, dict[str, float]]:
    """Precision, recall and AER of each method's links."""
    return {method: {k: v for k, v in asdict(alignment_error_rate(found, reference.links)).items() if k != "sentences"}
            for method, found in links.items()}


def export_alignments(cfg: AlignConfig) -> dict[str, Any]:
    """Export the alignments of a checkpoint into `cfg.align.out` (default `align-{data}` beside the
    checkpoint) -> the scores written to scores.json (with `out`: the folder)."""
    opts = cfg.align
    ckpt = checkpoint_path(cfg.ckpt, cfg.runs_dir)
    device = resolve_device(cfg.device)
    loaded = load_model(ckpt, device)
    _, run_cfg, src_tok, tgt_tok = loaded
    model, attention = whose_attention(loaded[0], opts.member, ckpt)
    split = None if opts.src and opts.tgt else cfg.split
    raw = load_parallel_files(Path(opts.src), Path(opts.tgt)) if opts.src and opts.tgt else load_split(run_cfg.data, cfg.split)
    name = Path(split_prefix(run_cfg.data, cfg.split)).name if split is not None else Path(str(opts.src)).stem
    reference = find_reference(cfg, run_cfg, split)
    sources = list(raw["src"])
    adaptations: dict[str, Any] = {}
    if opts.forced:
        targets = list(raw["tgt"])
        # eflomal's own links of the pairs stand beside gold where a user hands the pairs (a corpus, not a split
        # of the training data, whose aligner links `make aligner` caches)
        yardstick = reference is not None and reference.kind == "gold" and split is None
        aligner = pairs_links(cfg, raw, targets, yardstick)
        guide = aligner["gdfa"] if aligner is not None else None
        alignments, adaptations["forward"] = read_direction(cfg, loaded, ckpt, sources, targets, guide, device, name)
    else:  # (check_align refuses to adapt without forcing)
        key = f"align-{ckpt.stat().st_mtime_ns}-{name}-{len(raw)}"
        ds = fit_sources(encode_pairs(raw, src_tok, tgt_tok, key), model, key, name)
        alignments, targets = free_alignments(model, ds, src_tok, tgt_tok, cfg.decode, device)
        aligner = None
    methods: dict[str, list[list[Link]]] = {"forward": word_links(alignments, rule=link_rule(opts))}
    if opts.reverse_ckpt:
        reverse_guide = [{(j, i) for i, j in s} for s in aligner["gdfa"]] if aligner is not None else None
        adaptations["reverse"] = add_reverse(cfg, methods, sources, targets, reverse_guide, device, f"{name} (reverse)")
    chosen = opts.symmetrize.value if opts.reverse_ckpt else "forward"
    links = methods[chosen]
    scores: dict[str, Any] = {"checkpoint": str(ckpt), "attention": attention, "data": name, "sentences": len(alignments),
                              "forced": opts.forced, "threshold": opts.threshold, "merge": opts.merge.value, "shift": opts.shift,
                              "cover_source": opts.cover_source, "links": chosen, "kendall_tau": monotonicity(links)}
    if any(adaptations.values()):
        scores["adaptation"] = {"guided_by": "eflomal-gdfa of these pairs" if aligner is not None and opts.adapt.guide_weight else None,
                                **adaptations}
    if reference is not None:
        scores.update(scores_against(reference, links, alignments))
        scores["reference_one_based"] = reference.kind == "gold" and opts.gold_one_based
        scores["methods"] = scored(methods, reference)
        scores["best"] = min(scores["methods"], key=lambda method: scores["methods"][method]["aer"])
        if reference.kind == "gold" and aligner is not None:
            scores["eflomal"] = scored({"gdfa": [sorted(s) for s in aligner["gdfa"]]}, reference)["gdfa"]
    out = Path(opts.out) if opts.out else ckpt.parent / f"align-{name}"
    title = f"Alignments: {name} ({ckpt}; {attention} attention)"
    write_export(out, alignments, links, sources, targets, opts.heatmaps, scores, title)
    for method in ("forward", "reverse") if opts.reverse_ckpt else ():
        with atomic_output(out / f"alignments.{method}.pharaoh") as f:
            f.write("".join(format_links(s) + "\n" for s in methods[method]))
    atomic_write_text(out / "scores.json", json.dumps(scores, indent=2) + "\n")
    write_explorer(out / "explorer.html", explorer_data([out], title))
    return {**scores, "out": str(out)}
