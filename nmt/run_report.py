"""`metrics.json` of a finished run: what ran, how fast, best validation and test scores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nmt.alignment.aligner import aligner_links
from nmt.alignment.export import export_alignments
from nmt.command_config import AlignConfig, AlignOptions, EvalConfig
from nmt.config import Config
from nmt.data.corpus import gold_alignment_file
from nmt.evaluation import evaluate_checkpoint
from nmt.files import atomic_write_text
from nmt.resume import TrainingState


def write_metrics(cfg: Config, run_dir: Path, state: TrainingState, n_params: int, tokens_per_s: float, digests: list[str]) -> None:
    """Write `{run_dir}/metrics.json`; with `train.test_at_end`, evaluate the best checkpoint on
    the test split (and its alignments, when the corpus has gold ones or the aligner's links). `digests`: each training
    process's parameter digest (all equal when the data-parallel replicas stayed in sync)."""
    att = cfg.model.attention
    metrics: dict[str, Any] = {
        "data": cfg.data.name, "score": att.score.value, "mode": att.mode.value,
        "variant": {"hard": att.hard_estimator.value, "local": att.local.value}.get(att.mode.value, ""),
        "steps": state.step, "epochs": state.epoch, "minutes": round(state.minutes, 2),
        "tokens_per_s": round(tokens_per_s, 1), "parameters": n_params, "stop": state.stop,
        "skipped_steps": state.skipped_steps,
        "processes": {"count": len(digests), "replicas_identical": len(set(digests)) == 1, "parameter_sha1": digests},
        "valid": state.best,
    }
    if cfg.train.test_at_end and state.best:
        best = str(run_dir / "checkpoints" / "best.pt")
        report = evaluate_checkpoint(EvalConfig(
            ckpt=best, split="test", device=cfg.train.device, decode=cfg.train.decode
        ))
        metrics["test"] = {k: report[k] for k in ("bleu", "chrf", "exact_match")}
        if gold_alignment_file(cfg.data, "test") is not None or aligner_links(cfg.data, "test") is not None:
            options = AlignOptions(out=str(run_dir / "align-test"), heatmaps=4)
            align = AlignConfig(ckpt=best, split="test", device=cfg.train.device, decode=cfg.train.decode, align=options)
            scores = export_alignments(align)
            metrics["test"].update({k: scores[k] for k in ("aer", "precision", "recall", "reference")},
                                   diagonal_aer=scores["diagonal"]["aer"])
    atomic_write_text(run_dir / "metrics.json", json.dumps(metrics, indent=2) + "\n")
