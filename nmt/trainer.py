"""The training loop: one linear function you can read top to bottom.

`train(cfg, run_dir)` prepares the data, builds the model, and trains with Adam, gradient-norm
clipping and label smoothing; every `train.valid_every` steps it measures validation loss and
greedy BLEU, decays the learning rate on a BLEU plateau, keeps `checkpoints/best.pt` and
`checkpoints/last.pt`, and stops early, at `max_steps`, `max_epochs` or `max_minutes`.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from nmt.align import align
from nmt.alignment.heatmap import heatmap_figure
from nmt.checkpoint import bytes_tensor, save_checkpoint
from nmt.config import AlignConfig, AlignOptions, Config, EvalConfig, Score
from nmt.data.batching import Batch, BatchSampler
from nmt.data.corpus import gold_alignment_file
from nmt.data.prepare import prepare
from nmt.data.tokenizer import PAD
from nmt.errors import UserError
from nmt.evaluate import evaluate
from nmt.loss import smoothed_cross_entropy
from nmt.model.build import build_model
from nmt.model.seq2seq import Seq2Seq
from nmt.runtime import configure_allocator, resolve_device, seed_everything, set_threads
from nmt.validation import attention_examples, validate

log = logging.getLogger(__name__)


def batch_loss(model: Seq2Seq, batch: Batch, label_smoothing: float) -> tuple[torch.Tensor, torch.Tensor, int]:
    """-> (summed label-smoothed cross-entropy over the real target tokens, the attention's
    auxiliary loss (0 for most modes), number of real target tokens)."""
    real = batch.tgt_out != PAD
    out = model(batch.src, batch.src_lens, batch.tgt_in, positions=real)
    loss, nll = smoothed_cross_entropy(out.logits, batch.tgt_out[real], label_smoothing)
    # Reward of a sentence for stochastic attention: its mean target log-likelihood.
    token_ll = torch.zeros(real.shape, dtype=nll.dtype, device=nll.device).masked_scatter(real, -nll)
    reward = token_ll.sum(1) / real.sum(1)
    aux = model.decoder.attention.auxiliary_loss(out.memory, reward, real)
    return loss, (aux if aux is not None else loss.new_zeros(())), out.logits.size(0)


def train(cfg: Config, run_dir: Path) -> dict[str, Any]:
    """Train a model as `cfg` says, writing checkpoints, TensorBoard events into `run_dir`.
    Returns the final state: step, epoch, best validation metrics, stop reason."""
    seed_everything(cfg.seed)
    configure_allocator()
    set_threads(cfg.train.threads)
    device = resolve_device(cfg.train.device)
    run_dir = Path(run_dir)
    tc = cfg.train

    if cfg.model.attention.score == Score.location and cfg.data.max_len > cfg.model.attention.max_source_len:
        raise UserError(
            f"model.attention.score=location supports sources up to model.attention.max_source_len="
            f"{cfg.model.attention.max_source_len} tokens, but data.max_len={cfg.data.max_len} lets longer ones in"
        )
    data = prepare(cfg.data)
    sampler = BatchSampler(data.split("train"), cfg.data.batch_tokens, shuffle=True, seed=cfg.seed)
    model = build_model(cfg.model, len(data.src_tokenizer), len(data.tgt_tokenizer)).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    log.info("model: %d parameters; %d training batches per epoch", n_params, len(sampler))
    optimizer = torch.optim.Adam(model.parameters(), lr=tc.lr, weight_decay=tc.weight_decay)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="max", factor=tc.lr_decay_factor, patience=tc.lr_decay_patience, min_lr=tc.min_lr
    )
    writer = SummaryWriter(str(run_dir / "tensorboard"))
    resolved = OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True, enum_to_str=True)

    state: dict[str, Any] = {"step": 0, "epoch": 0, "best_bleu": -1.0, "best": {}, "bad_validations": 0, "stop": ""}

    def checkpoint(name: str, metrics: dict[str, float]) -> None:
        save_checkpoint(run_dir / "checkpoints" / name, {
            "model": model.state_dict(), "config": resolved,
            "src_spm": bytes_tensor(data.src_tokenizer.model_proto), "tgt_spm": bytes_tensor(data.tgt_tokenizer.model_proto),
            "step": state["step"], "epoch": state["epoch"], "metrics": metrics,
            "best_bleu": state["best_bleu"], "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "n_params": n_params,
        })

    def run_validation() -> None:
        metrics = validate(model, data, cfg, device)
        for key, value in metrics.items():
            writer.add_scalar(f"valid/{key}", value, state["step"])
        for k, example in enumerate(attention_examples(model, data, cfg.log.attention_examples, device)):
            title = f"step {state['step']}"
            fig = heatmap_figure(example.matrix, example.src_pieces, example.tgt_pieces, title)
            writer.add_figure(f"attention/{k}", fig, state["step"], close=False)
        improved = metrics["bleu"] > state["best_bleu"]
        if improved:
            state.update(best_bleu=metrics["bleu"], best=dict(metrics, step=state["step"]), bad_validations=0)
            checkpoint("best.pt", metrics)
        else:
            state["bad_validations"] += 1
        scheduler.step(metrics["bleu"])
        checkpoint("last.pt", metrics)
        log.info(
            "step %d valid: loss %.3f ppl %.2f BLEU %.2f chrF %.2f exact %.3f%s",
            state["step"], metrics["loss"], metrics["ppl"], metrics["bleu"], metrics["chrf"],
            metrics["exact_match"], " (best)" if improved else "",
        )
        if tc.stop_at_exact_match and metrics["exact_match"] >= tc.stop_at_exact_match:
            state["stop"] = f"validation exact match {metrics['exact_match']:.3f} >= {tc.stop_at_exact_match}"
        elif state["bad_validations"] >= tc.early_stopping_patience:
            state["stop"] = f"early stopping: no better validation BLEU in {tc.early_stopping_patience} validations"

    start = time.monotonic()
    bar = tqdm(total=tc.max_steps or None, disable=not tc.progress, unit="step", dynamic_ncols=True)
    window_tokens, window_time, window_loss = 0, 0.0, 0.0
    speeds: list[float] = []
    model.train()
    while not state["stop"]:
        if tc.max_epochs and state["epoch"] >= tc.max_epochs:
            state["stop"] = f"max_epochs={tc.max_epochs} reached"
            break
        for batch in sampler.epoch(state["epoch"]):
            t0 = time.perf_counter()
            loss, n_tokens = train_step(model, optimizer, batch.to(device), tc.label_smoothing, tc.clip_grad_norm)
            state["step"] += 1
            window_tokens += n_tokens
            window_loss += loss
            window_time += time.perf_counter() - t0
            bar.update(1)
            if state["step"] % tc.log_every == 0:
                speed = window_tokens / max(window_time, 1e-9)
                speeds.append(speed)
                writer.add_scalar("train/loss", window_loss / window_tokens, state["step"])
                writer.add_scalar("train/ppl", math.exp(min(window_loss / window_tokens, 50)), state["step"])
                writer.add_scalar("train/lr", optimizer.param_groups[0]["lr"], state["step"])
                writer.add_scalar("train/tokens_per_s", speed, state["step"])
                bar.set_postfix(loss=f"{window_loss / window_tokens:.3f}", tok_s=f"{speed:.0f}", ep=state["epoch"])
                window_tokens, window_time, window_loss = 0, 0.0, 0.0
            if state["step"] % tc.valid_every == 0:
                run_validation()
            if tc.max_steps and state["step"] >= tc.max_steps:
                state["stop"] = state["stop"] or f"max_steps={tc.max_steps} reached"
            if tc.max_minutes and time.monotonic() - start >= tc.max_minutes * 60:
                state["stop"] = state["stop"] or f"max_minutes={tc.max_minutes} reached"
            if state["stop"]:
                break
        else:
            state["epoch"] += 1
    bar.close()
    if state["step"] % tc.valid_every != 0:
        run_validation()
    writer.close()
    state["minutes"] = (time.monotonic() - start) / 60
    log.info("stopped after %d steps (%.1f min): %s; best valid BLEU %.2f at step %s",
             state["step"], state["minutes"], state["stop"], state["best_bleu"], state["best"].get("step"))
    write_metrics(cfg, run_dir, state, n_params, float(np.median(speeds)) if speeds else 0.0)
    return state


def write_metrics(cfg: Config, run_dir: Path, state: dict[str, Any], n_params: int, tokens_per_s: float) -> None:
    """Write `metrics.json`: what ran, how fast, best validation and (optionally) test scores."""
    att = cfg.model.attention
    metrics: dict[str, Any] = {
        "data": cfg.data.name, "score": att.score.value, "mode": att.mode.value,
        "variant": {"hard": att.hard_estimator.value, "local": att.local.value}.get(att.mode.value, ""),
        "steps": state["step"], "epochs": state["epoch"], "minutes": round(state["minutes"], 2),
        "tokens_per_s": round(tokens_per_s, 1), "parameters": n_params, "stop": state["stop"],
        "valid": state["best"],
    }
    if cfg.train.test_at_end and state["best"]:
        best = str(run_dir / "checkpoints" / "best.pt")
        report = evaluate(EvalConfig(
            ckpt=best, split="test", device=cfg.train.device, beam_size=cfg.train.valid_beam_size, alpha=cfg.train.valid_alpha
        ))
        metrics["test"] = {k: report[k] for k in ("bleu", "chrf", "exact_match")}
        if gold_alignment_file(cfg.data, "test") is not None:
            options = AlignOptions(split="test", out=str(run_dir / "align-test"), heatmaps=4)
            scores = align(AlignConfig(ckpt=best, device=cfg.train.device, align=options))
            metrics["test"].update({k: scores[k] for k in ("aer", "precision", "recall")})
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")


def train_step(model: Seq2Seq, optimizer: torch.optim.Optimizer, batch: Batch, label_smoothing: float, clip: float) -> tuple[float, int]:
    """One optimiser step on a batch -> (summed cross-entropy, target tokens)."""
    loss, aux, n_tokens = batch_loss(model, batch, label_smoothing)
    optimizer.zero_grad(set_to_none=True)
    ((loss + aux) / n_tokens).backward()
    if clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()
    return float(loss.detach()), n_tokens
