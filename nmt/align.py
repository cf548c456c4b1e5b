"""`python -m nmt.align ckpt=PATH [align.split=test | align.src=F align.tgt=G] [align.gold=PATH]`.

Reads the attention of a trained model as word alignment, forced on the given target (default) or
on the model's own translation (`align.forced=false`), and writes into `align.out`:
matrices.jsonl, matrices_word.jsonl, alignments.pharaoh, heatmaps/NNNN.png, report.html, and with
gold alignments (Pharaoh, `i-j` sure, `ipj` possible) precision, recall and AER in scores.json.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from nmt.alignment.aer import alignment_error_rate
from nmt.alignment.extract import forced_alignments, free_alignments
from nmt.alignment.pharaoh import read_pharaoh
from nmt.alignment.report import write_export
from nmt.checkpoint import load_model
from nmt.config import AlignConfig, register_configs
from nmt.data.corpus import gold_alignment_file, load_parallel_files, load_split, split_prefix
from nmt.data.prepare import encode_pairs
from nmt.errors import UserError, as_schema, exit_on_user_error
from nmt.evaluate import newest_checkpoint
from nmt.runtime import resolve_device
from nmt.validation import word_links

register_configs()


def align(cfg: AlignConfig) -> dict[str, Any]:
    """Export the alignments of a checkpoint on a split or two files; returns the scores."""
    opts = cfg.align
    ckpt = Path(cfg.ckpt) if cfg.ckpt else newest_checkpoint(cfg.runs_dir)
    device = resolve_device(cfg.device)
    model, run_cfg, src_tok, tgt_tok = load_model(ckpt, device)
    if (opts.src is None) != (opts.tgt is None):
        raise UserError("align.src and align.tgt go together: give both files, or neither and align.split")
    if opts.src and opts.tgt:
        raw, name, gold = load_parallel_files(Path(opts.src), Path(opts.tgt)), Path(opts.src).stem, None
    else:
        raw, name = load_split(run_cfg.data, opts.split), Path(split_prefix(run_cfg.data, opts.split)).name
        gold = gold_alignment_file(run_cfg.data, opts.split)
    gold = Path(opts.gold) if opts.gold else gold
    ds = encode_pairs(raw, src_tok, tgt_tok, f"align-{ckpt.stat().st_mtime_ns}-{name}-{len(raw)}")
    sources = list(raw["src"])
    if opts.forced:
        alignments, targets = forced_alignments(model, ds, src_tok, tgt_tok, opts.batch_tokens, device), list(raw["tgt"])
    else:
        alignments, targets = free_alignments(model, ds, src_tok, tgt_tok, opts.batch_tokens, device)
    links = word_links(alignments, opts.threshold)
    scores: dict[str, Any] = {"checkpoint": str(ckpt), "data": name, "sentences": len(alignments),
                              "forced": opts.forced, "threshold": opts.threshold}
    if gold is not None:
        result = alignment_error_rate(links, read_pharaoh(gold, opts.gold_one_based))
        scores.update(gold=str(gold), **asdict(result))
        print(f"{name}: precision {result.precision:.4f}  recall {result.recall:.4f}  AER {result.aer:.4f}  (gold: {gold})")
    out = Path(opts.out) if opts.out else ckpt.parent / f"align-{name}"
    write_export(out, alignments, links, sources, targets, opts.heatmaps, scores, f"Alignments: {name} ({ckpt})")
    (out / "scores.json").write_text(json.dumps(scores, indent=2) + "\n")
    print(f"wrote {len(alignments)} alignments to {out}/")
    return scores


@hydra.main(config_path="../configs", config_name="align", version_base="1.3")
@exit_on_user_error
def main(cfg: DictConfig) -> None:
    config = as_schema(cfg, AlignConfig)
    align(config)


if __name__ == "__main__":
    main()
