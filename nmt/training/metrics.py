"""`metrics.json` of a finished run: what ran, how fast, best validation and test scores; the
same, as hyper-parameters and metrics, for TensorBoard's HParams dashboard."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch.utils.tensorboard import SummaryWriter

from nmt.alignment.eflomal import aligner_links
from nmt.alignment.export import export_alignments
from nmt.config.commands import AlignConfig, AlignOptions, EvalConfig
from nmt.config.schema import Config
from nmt.data.corpus import gold_alignment_file
from nmt.decoding.scoring import evaluate_checkpoint
from nmt.system.files import atomic_write_text
from nmt.training.resume import TrainingState


def run_choices(cfg: Config) -> dict[str, str]:
    """The first keys of metrics.json: the data and the attention the run chose."""
    att = cfg.model.attention
    return {"data": cfg.data.name, "score": att.score.value, "mode": att.mode.value,
            "variant": {"hard": att.hard_estimator.value, "local": att.local.value}.get(att.mode.value, "")}


def write_metrics(cfg: Config, run_dir: Path, state: TrainingState, n_params: int, tokens_per_s: float, digests: list[str],
                  selection: dict[str, Any] | None = None) -> None:
    """Write `{run_dir}/metrics.json`; with `train.test_at_end`, evaluate the best checkpoint on
    the test split (and its alignments, when the corpus has gold ones or the aligner's links). `digests`: each training
    process's parameter digest (all equal when the data-parallel replicas stayed in sync); `selection`: how
    best.pt was chosen at the end (`nmt.training.selection`), if it was."""
    metrics: dict[str, Any] = {
        **run_choices(cfg), "steps": state.step, "epochs": state.epoch, "minutes": round(state.minutes, 2),
        "tokens_per_s": round(tokens_per_s, 1), "parameters": n_params,
        "precision": state.precision, "stop": state.stop,
        "skipped_steps": state.skipped_steps,
        "processes": {"count": len(digests), "replicas_identical": len(set(digests)) == 1, "parameter_sha1": digests},
        "valid": state.best,
        **({"selection": selection} if selection else {}),
    }
    if cfg.train.test_at_end and state.best:
        metrics["test"] = test_report(cfg, run_dir)
    save_metrics(cfg, run_dir, metrics)


def save_metrics(cfg: Config, run_dir: Path, metrics: dict[str, Any]) -> None:
    """`{run_dir}/metrics.json` (atomically) and its TensorBoard HParams session."""
    atomic_write_text(run_dir / "metrics.json", json.dumps(metrics, indent=2) + "\n")
    write_hparams(cfg, run_dir / "tensorboard" / "hparams", metrics)


def scores_of(cfg: Config, ckpt: Path, split: str) -> dict[str, float]:
    """BLEU, chrF and exact match of `ckpt` on `split`, decoded as `train.decode` says."""
    report = evaluate_checkpoint(EvalConfig(ckpt=str(ckpt), split=split, device=cfg.train.device, decode=cfg.train.decode))
    return {k: report[k] for k in ("bleu", "chrf", "exact_match")}


def test_report(cfg: Config, run_dir: Path) -> dict[str, Any]:
    """The test scores of `{run_dir}/checkpoints/best.pt`, with those of its alignments (into
    `align-test/`) when the corpus has gold ones or the aligner's links."""
    best = run_dir / "checkpoints" / "best.pt"
    test: dict[str, Any] = scores_of(cfg, best, "test")
    if gold_alignment_file(cfg.data, "test") is not None or aligner_links(cfg.data, "test") is not None:
        options = AlignOptions(out=str(run_dir / "align-test"), heatmaps=4)
        align = AlignConfig(ckpt=str(best), split="test", device=cfg.train.device, decode=cfg.train.decode, align=options)
        scores = export_alignments(align)
        test.update({k: scores[k] for k in ("aer", "precision", "recall", "reference", "kendall_tau")},
                    diagonal_aer=scores["diagonal"]["aer"])
    return test


def write_hparams(cfg: Config, folder: Path, metrics: dict[str, Any]) -> None:
    """The run's choices and final scores for TensorBoard's HParams dashboard (one session per run;
    `tensorboard --logdir` over several runs compares them)."""
    att, train = cfg.model.attention, cfg.train
    hparams = {
        "data": cfg.data.name, "score": att.score.value, "mode": att.mode.value, "variant": metrics["variant"] or "-",
        "attend_from": att.attend_from.value, "coverage": att.coverage, "guided_alignment": train.guided_alignment.weight,
        "lr": train.lr, "batch_tokens": cfg.data.batch_tokens, "steps": metrics["steps"],
    }
    found = {f"valid/{k}": metrics["valid"].get(k) for k in ("bleu", "chrf", "attention_entropy")}
    found.update({f"test/{k}": metrics.get("test", {}).get(k) for k in ("bleu", "chrf", "aer", "diagonal_aer", "kendall_tau")})
    values = {k: float(v) for k, v in found.items() if isinstance(v, (int, float))}
    with SummaryWriter(str(folder)) as writer:
        writer.add_hparams(hparams, values, run_name=".")
