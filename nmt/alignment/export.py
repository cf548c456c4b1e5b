"""The alignment export of a checkpoint: read its attention as word alignment on a split (or two
files), forced on the given target or on the model's own translation, score it against gold
alignments when there are some, and write the files of `nmt.alignment.report`."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from nmt.alignment.aer import alignment_error_rate
from nmt.alignment.extract import forced_alignments, free_alignments
from nmt.alignment.pharaoh import read_pharaoh
from nmt.alignment.report import write_export
from nmt.alignment.words import word_links
from nmt.checkpoint import checkpoint_path, load_model
from nmt.command_config import AlignConfig
from nmt.data.corpus import gold_alignment_file, load_parallel_files, load_split, split_prefix
from nmt.data.prepare import encode_pairs
from nmt.decoding import fit_sources
from nmt.files import atomic_write_text
from nmt.runtime import resolve_device


def export_alignments(cfg: AlignConfig) -> dict[str, Any]:
    """Export the alignments of a checkpoint into `cfg.align.out` (default `align-{data}` beside the
    checkpoint) -> the scores written to scores.json (with `out`: the folder)."""
    opts = cfg.align
    ckpt = checkpoint_path(cfg.ckpt, cfg.runs_dir)
    device = resolve_device(cfg.device)
    model, run_cfg, src_tok, tgt_tok = load_model(ckpt, device)
    if opts.src and opts.tgt:
        raw, name, gold = load_parallel_files(Path(opts.src), Path(opts.tgt)), Path(opts.src).stem, None
    else:
        raw, name = load_split(run_cfg.data, cfg.split), Path(split_prefix(run_cfg.data, cfg.split)).name
        gold = gold_alignment_file(run_cfg.data, cfg.split)
    gold = Path(opts.gold) if opts.gold else gold
    key = f"align-{ckpt.stat().st_mtime_ns}-{name}-{len(raw)}"
    ds = fit_sources(encode_pairs(raw, src_tok, tgt_tok, key), model, key, name)
    if opts.forced:
        alignments, targets = forced_alignments(model, ds, src_tok, tgt_tok, cfg.decode.batch_tokens, device), list(raw["tgt"])
    else:
        alignments, targets = free_alignments(model, ds, src_tok, tgt_tok, cfg.decode, device)
    links = word_links(alignments, opts.threshold)
    scores: dict[str, Any] = {"checkpoint": str(ckpt), "data": name, "sentences": len(alignments),
                              "forced": opts.forced, "threshold": opts.threshold}
    if gold is not None:
        scores.update(gold=str(gold), **asdict(alignment_error_rate(links, read_pharaoh(gold, opts.gold_one_based))))
    out = Path(opts.out) if opts.out else ckpt.parent / f"align-{name}"
    write_export(out, alignments, links, list(raw["src"]), targets, opts.heatmaps, scores, f"Alignments: {name} ({ckpt})")
    atomic_write_text(out / "scores.json", json.dumps(scores, indent=2) + "\n")
    return {**scores, "out": str(out)}
