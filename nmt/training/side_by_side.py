"""`train.ensemble_size=N`: N models trained side by side, then decoded as one ensemble.

Each model is an ordinary training run of its own process, in `{run dir}/model{k}/` (its own
checkpoints, TensorBoard events, log and metrics.json), with seed `seed + k` (so its initial
weights, batch order and dropout differ) and `train.threads` threads (0: the cores shared out).
All read the data this process prepared first and spend the same budget at the same time. When
the last one ends, `{run dir}/checkpoints/last.pt` (their last.pt files) and `best.pt` (their
best.pt files, or their last.pt files when those validate better together) are written as
ensemble checkpoints, which every command decodes as an ensemble (the mean of the models'
probabilities; their mean attention as the alignment), and `{run dir}/metrics.json` gets the
ensemble's validation and test scores.

Why: on a few CPU cores torch's threads scale poorly on this model's small matrix products, so
N one-thread trainings do more work per minute than one N-thread training, and an ensemble of
independently trained models scores above each of them (the preset +experiment=cpu_ensemble).
The models' processes: `nmt.training.processes`.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.tensorboard import SummaryWriter

from nmt.alignment.heatmap import heatmap_figure
from nmt.config.schema import Config
from nmt.data.prepare import prepare
from nmt.decoding.splits import fit_sources
from nmt.model.checkpoint import ensemble_checkpoint, load_checkpoint, load_model, save_checkpoint
from nmt.system.errors import Interrupted
from nmt.system.runtime import resolve_device
from nmt.training.loop import prepare_checked
from nmt.training.metrics import run_choices, save_metrics, scores_of, test_report
from nmt.training.processes import member_dir, run_members
from nmt.training.resume import check_continuable, hold_run_dir, load_resumable, resume_checkpoint
from nmt.training.validation import attention_examples

log = logging.getLogger(__name__)


@dataclass
class EnsembleResult:
    """What an ensemble training measured: the ensemble's validation scores (of best.pt) and each model's metrics.json."""

    valid: dict[str, float]
    members: list[dict[str, Any]]

    @property
    def best_bleu(self) -> float:
        return self.valid["bleu"]


def member_device(device: str, k: int) -> str:
    """Model k's device: with several GPUs the models take them in turn; otherwise the run's device."""
    gpus = torch.cuda.device_count() if device in ("auto", "cuda") else 0
    return f"cuda:{k % gpus}" if gpus > 1 else device


def member_config(cfg: Config, k: int) -> Config:
    """The training config of model k: its own seed, its share of the cores, no progress bar (the
    models' logs interleave), no test of its own (the ensemble is tested), and its own run to resume."""
    member = copy.deepcopy(cfg)
    tc = member.train
    member.seed = cfg.seed + k
    tc.ensemble_size = 1
    tc.threads = cfg.train.threads or max(1, len(os.sched_getaffinity(0)) // cfg.train.ensemble_size)
    tc.device = member_device(cfg.train.device, k)
    tc.progress = False
    tc.test_at_end = False
    tc.select_at_end = False  # the ensemble chooses its own best.pt (write_ensemble)
    if tc.resume not in ("", "auto"):
        tc.resume = str(member_dir(Path(tc.resume), k))
    return member


def write_ensemble(cfg: Config, run_dir: Path) -> tuple[str, dict[str, dict[str, float]]]:
    """`{run_dir}/checkpoints/last.pt`: the models' last.pt files as one ensemble checkpoint;
    `best.pt`: of the ensemble of their best.pt files and that one, the one with the better
    validation BLEU (as `train.decode` decodes; a tie keeps their best.pt files), as a model's
    best.pt is its best validation. Each model's best.pt is chosen by its own validation, which
    need not make the best pair: under a budget schedule the last weights often validate better
    together. -> (which of the models' checkpoints best.pt holds, each candidate's validation
    scores by the name of the models' checkpoints it holds)."""
    folder, scores = run_dir / "checkpoints", {}
    for name in ("last.pt", "best.pt"):
        paths = [member_dir(run_dir, k) / "checkpoints" / name for k in range(cfg.train.ensemble_size)]
        save_checkpoint(folder / name, ensemble_checkpoint(paths))
        scores[name] = scores_of(cfg, folder / name, "valid")
    chosen = "last.pt" if scores["last.pt"]["bleu"] > scores["best.pt"]["bleu"] else "best.pt"
    if chosen == "last.pt":
        save_checkpoint(folder / "best.pt", load_checkpoint(folder / "last.pt"))
        for stale in folder.glob("best.*.hyp"):  # the hypotheses and report of the candidate it replaces
            stale.with_suffix(".json").unlink(missing_ok=True)
            stale.unlink()
    return chosen, scores


def log_mean_attention(cfg: Config, run_dir: Path, step: int) -> None:
    """TensorBoard heatmaps (`attention/<k>`, in the run's own events beside its models' folders) of
    the attention the ensemble's best.pt decodes with: the mean of its models', titled as such (no
    model computed its context from it; each model's own is in model{k}/)."""
    if not cfg.log.attention_examples:
        return
    device = resolve_device(cfg.train.device)
    model, _, _, _ = load_model(run_dir / "checkpoints" / "best.pt", device)
    data = prepare(cfg.data)
    valid = fit_sources(data.split("valid"), model, f"{data.folder.name}-valid", "valid")
    examples = attention_examples(model, valid, data, cfg.log.attention_examples, device)
    with SummaryWriter(str(run_dir / "tensorboard")) as writer:
        for k, example in enumerate(examples):
            title = f"mean of the ensemble's {cfg.train.ensemble_size} models, step {step}"
            writer.add_figure(f"attention/{k}", heatmap_figure(example.matrix, example.src_pieces, example.tgt_pieces, title), step)


def ensemble_metrics(cfg: Config, run_dir: Path, members: list[dict[str, Any]], minutes: float, chosen: str,
                     candidates: dict[str, dict[str, float]]) -> dict[str, Any]:
    """metrics.json of the ensemble: the run's choices, its models' own metrics, the validation
    scores of both candidates for best.pt and which one it is, and (with `train.test_at_end`) the test scores of best.pt."""
    metrics: dict[str, Any] = {
        **run_choices(cfg), "ensemble_size": len(members), "steps": max(m["steps"] for m in members), "minutes": round(minutes, 2),
        "tokens_per_s": round(sum(m["tokens_per_s"] for m in members), 1), "parameters": sum(m["parameters"] for m in members),
        "stop": "; ".join(sorted({m["stop"] for m in members})),
        "valid": candidates[chosen], "best_pt_holds": f"the models' {chosen}", "valid_candidates": candidates,
        "members": members,
    }
    if cfg.train.test_at_end:
        metrics["test"] = test_report(cfg, run_dir)
    return metrics


def train_ensemble(cfg: Config, run_dir: Path, on_start: Callable[[], None] | None = None,
                   set_up: Callable[[], None] | None = None) -> EnsembleResult:
    """Train `train.ensemble_size` models at once into `run_dir/model{k}` and write their ensemble
    checkpoints and metrics.json into `run_dir` (held for the whole run, as `nmt.training.loop.train` holds
    its own). Nothing is written before every model is known to continue its run or start one where
    none is (`check_continuable`, `load_resumable`); `on_start` runs then, `set_up` (picklable)
    first thing in every model's process."""
    size = cfg.train.ensemble_size
    run_dir = Path(run_dir)
    with hold_run_dir(run_dir):
        check_continuable(cfg, run_dir)
        data = prepare_checked(cfg)  # once, here: the models then read the cache instead of racing to fill it
        configs = [member_config(cfg, k) for k in range(size)]
        for k, member in enumerate(configs):  # every model continues its run, or the run is refused before any is written
            path = resume_checkpoint(member.train.resume, member_dir(run_dir, k))
            if path is not None:
                load_resumable(path, member, data.src_tokenizer.model_proto, data.tgt_tokenizer.model_proto)
        if on_start is not None:
            on_start()
        log.info("training %d models side by side (seeds %s, %d thread(s) each) into %s/model*", size,
                 ", ".join(str(c.seed) for c in configs), configs[0].train.threads, run_dir)
        started = time.monotonic()
        run_members(configs, run_dir, set_up)
        try:
            return finish_ensemble(cfg, run_dir, (time.monotonic() - started) / 60)
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted while writing the ensemble's checkpoints; its models are trained: write them with "
                              f"train.resume=auto hydra.run.dir={run_dir}") from None


def finish_ensemble(cfg: Config, run_dir: Path, minutes: float) -> EnsembleResult:
    """After the models' trainings (in `run_dir/model{k}`, `minutes` long): the ensemble
    checkpoints, their scores and metrics.json."""
    size = cfg.train.ensemble_size
    chosen, candidates = write_ensemble(cfg, run_dir)
    members = [json.loads((member_dir(run_dir, k) / "metrics.json").read_text()) for k in range(size)]
    log_mean_attention(cfg, run_dir, max(m["steps"] for m in members))
    metrics = ensemble_metrics(cfg, run_dir, members, minutes, chosen, candidates)
    save_metrics(cfg, run_dir, metrics)
    test = metrics.get("test", {}).get("bleu")
    log.info("ensemble of %d (best.pt: %s): valid BLEU %.2f (models %s)%s", size, metrics["best_pt_holds"], metrics["valid"]["bleu"],
             ", ".join(f"{m['valid']['bleu']:.2f}" for m in members), f"; test BLEU {test:.2f}" if test is not None else "")
    return EnsembleResult(metrics["valid"], members)
