"""The training loop, readable top to bottom.

`train(cfg, run_dir)` prepares the data, builds the model, and trains with Adam, gradient-norm
clipping and label smoothing; every `train.valid_every` steps it measures validation loss and
greedy BLEU, decays the learning rate on a BLEU plateau, keeps `checkpoints/best.pt` and
`checkpoints/last.pt` (with everything needed to resume exactly), and stops early, at
`max_steps`, `max_epochs` or `max_minutes`. Under torchrun it trains data-parallel; rank 0 writes.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from torch.nn.parallel import DistributedDataParallel
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from nmt import distributed as dist
from nmt.alignment.heatmap import heatmap_figure
from nmt.checkpoint import bytes_tensor, load_checkpoint, save_checkpoint
from nmt.config import Config
from nmt.data.batching import BatchSampler
from nmt.data.prepare import prepare
from nmt.errors import UserError
from nmt.evaluation import fit_sources
from nmt.files import Busy, file_lock, remove_orphans
from nmt.model.build import build_model
from nmt.resume import check_compatible, check_same_vocabulary, init_weights, restore_rng, resume_checkpoint, rng_state
from nmt.run_report import write_metrics
from nmt.runtime import autocast_dtype, configure_allocator, resolve_device, seed_everything, set_threads
from nmt.step import train_step
from nmt.validation import attention_examples, check_gold, validate

log = logging.getLogger(__name__)


def fresh_state() -> dict[str, Any]:
    """The loop's counters: all of it goes into every checkpoint, so a resumed run continues it."""
    return {
        "step": 0, "epoch": 0, "batch_in_epoch": 0, "best_bleu": -1.0, "best": {}, "bad_validations": 0,
        "elapsed_s": 0.0, "nonfinite_in_row": 0, "skipped_steps": 0, "stop": "",
    }


class RunDirectoryBusy(UserError):
    log_to_run = False  # the run directory's log belongs to the training that holds it


@contextlib.contextmanager
def hold_run_dir(run_dir: Path) -> Iterator[None]:
    """Hold the lock of `run_dir` for the whole training (released however the process ends, so a
    killed run leaves nothing that blocks `train.resume=auto`), and clear the temporary files a
    killed run left in its checkpoints folder."""
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(file_lock(run_dir / ".lock", wait=False, note=f"process {os.getpid()} on {socket.gethostname()}"))
    except Busy as busy:
        raise RunDirectoryBusy(
            f"{run_dir}: another training ({busy.holder or 'another process'}) is running in this run directory; "
            "wait for it to end, or choose another hydra.run.dir"
        ) from None
    with stack:
        if (run_dir / "checkpoints").is_dir():
            for path in remove_orphans(run_dir / "checkpoints"):
                log.info("removed %s, left by a run that was killed while writing it", path)
        yield


def train(cfg: Config, run_dir: Path, on_start: Callable[[], None] | None = None) -> dict[str, Any]:
    """Train a model as `cfg` says, writing checkpoints, TensorBoard events into `run_dir`, which
    it holds for itself (a second training there is refused); `on_start` runs once it holds it.
    Returns the final state: step, epoch, best validation metrics, stop reason."""
    run_dir = Path(run_dir)
    with hold_run_dir(run_dir):
        if on_start is not None:
            on_start()
        seed_everything(cfg.seed)
        configure_allocator()
        set_threads(cfg.train.threads)
        world = dist.init_world(resolve_device(cfg.train.device))
        try:
            return _train(cfg, run_dir, world)
        finally:
            dist.shutdown(world)


def _train(cfg: Config, run_dir: Path, world: dist.World) -> dict[str, Any]:
    tc = cfg.train
    device = dist.local_device(resolve_device(tc.device), world)
    splits = ("valid", "test") if tc.test_at_end else ("valid",)
    if world.is_main:  # one process fills the data cache, the others then read it
        data = prepare(cfg.data)
        data.check_ready(splits)  # every split and gold file the run will read, before the first step
        for split in splits:
            check_gold(data, split)
    dist.barrier(world)
    if not world.is_main:
        data = prepare(cfg.data)
    sampler = BatchSampler(
        data.split("train"), cfg.data.batch_tokens, shuffle=True, seed=cfg.seed, max_sentences=cfg.data.batch_sentences
    )
    if len(sampler) < world.size:
        raise UserError(f"{len(sampler)} training batches cannot be shared by {world.size} processes; lower data.batch_tokens")
    model = build_model(cfg.model, len(data.src_tokenizer), len(data.tgt_tokenizer)).to(device)
    valid = fit_sources(data.split("valid"), model, f"{data.folder.name}-valid", "valid")
    n_params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.Adam(model.parameters(), lr=tc.lr, weight_decay=tc.weight_decay)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
        optimizer, mode="max", factor=tc.lr_decay_factor, patience=tc.lr_decay_patience, min_lr=tc.min_lr
    )
    resolved = OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True, enum_to_str=True)
    state = fresh_state()

    resume_from = dist.from_main(lambda: resume_checkpoint(tc.resume, run_dir), world)
    if resume_from is not None:
        payload = load_checkpoint(resume_from, device)
        check_compatible(payload["config"], cfg, resume_from)
        check_same_vocabulary(payload, data.src_tokenizer.model_proto, data.tgt_tokenizer.model_proto, str(resume_from))
        if "train_state" not in payload:
            raise UserError(f"{resume_from}: checkpoint holds no training state to resume from (written by `best.pt`?)")
        model.load_state_dict(payload["model"])
        optimizer.load_state_dict(payload["optimizer"])
        scheduler.load_state_dict(payload["scheduler"])
        state.update(payload["train_state"], stop="")
        rngs = payload["rng"]
        if len(rngs) == world.size:
            restore_rng(rngs[world.rank])
        else:
            log.warning("%s was written by %d processes, now %d: the random streams restart", resume_from, len(rngs), world.size)
        if world.is_main:
            log.info("resumed %s at step %d (epoch %d, batch %d)", resume_from, state["step"], state["epoch"], state["batch_in_epoch"])
    elif tc.init_from:
        init_weights(model, tc.init_from, data.src_tokenizer.model_proto, data.tgt_tokenizer.model_proto)
    if world.distributed and resume_from is None:
        seed_everything(cfg.seed + world.rank)  # different dropout masks per replica (weights are already equal)
    if tc.compile:
        model.decoder.compile_step()
    forward = None
    if world.distributed:
        forward = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    cast = autocast_dtype(tc.precision.value, device)
    if world.is_main:
        log.info("model: %d parameters; %d training batches per epoch; %s%s, %d process(es)",
                 n_params, len(sampler), device, " bf16 autocast" if cast else "", world.size)

    writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=state["step"] + 1 if resume_from else None) if world.is_main else None

    def checkpoint(name: str, metrics: dict[str, float], rngs: list[Any]) -> None:
        save_checkpoint(run_dir / "checkpoints" / name, {
            "model": model.state_dict(), "config": resolved,
            "src_spm": bytes_tensor(data.src_tokenizer.model_proto), "tgt_spm": bytes_tensor(data.tgt_tokenizer.model_proto),
            "step": state["step"], "epoch": state["epoch"], "metrics": metrics, "best_bleu": state["best_bleu"],
            "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "n_params": n_params,
            "train_state": {k: v for k, v in state.items() if k != "stop"}, "rng": rngs,
        })

    def run_validation() -> None:
        metrics = dist.from_main(lambda: validate(model, valid, data, cfg, device), world)
        improved = metrics["bleu"] > state["best_bleu"]
        if improved:
            state.update(best_bleu=metrics["bleu"], best=dict(metrics, step=state["step"]), bad_validations=0)
        else:
            state["bad_validations"] += 1
        scheduler.step(metrics["bleu"])
        if tc.stop_at_exact_match and metrics["exact_match"] >= tc.stop_at_exact_match:
            state["stop"] = f"validation exact match {metrics['exact_match']:.3f} >= {tc.stop_at_exact_match}"
        elif state["bad_validations"] >= tc.early_stopping_patience:
            state["stop"] = f"early stopping: no better validation BLEU in {tc.early_stopping_patience} validations"
        state["elapsed_s"] = elapsed()
        rngs = dist.gather_objects(rng_state(), world)  # every rank's generators, for an exact resume
        if writer is None:
            return
        for key, value in metrics.items():
            writer.add_scalar(f"valid/{key}", value, state["step"])
        for k, example in enumerate(attention_examples(model, valid, data, cfg.log.attention_examples, device)):
            fig = heatmap_figure(example.matrix, example.src_pieces, example.tgt_pieces, f"step {state['step']}")
            writer.add_figure(f"attention/{k}", fig, state["step"], close=False)
        writer.flush()
        if improved:
            checkpoint("best.pt", metrics, rngs)
        checkpoint("last.pt", metrics, rngs)  # last: it is what a resume reads
        log.info(
            "step %d valid: loss %.3f ppl %.2f BLEU %.2f chrF %.2f exact %.3f%s",
            state["step"], metrics["loss"], metrics["ppl"], metrics["bleu"], metrics["chrf"],
            metrics["exact_match"], " (best)" if improved else "",
        )

    start, elapsed_before = time.monotonic(), state["elapsed_s"]

    def elapsed() -> float:
        return elapsed_before + time.monotonic() - start

    show = tc.progress and world.is_main
    bar = tqdm(total=tc.max_steps or None, initial=state["step"], disable=not show, unit="step", dynamic_ncols=True)
    window_tokens, window_time, window_loss = 0, 0.0, 0.0
    speeds: list[float] = []
    model.train()
    while not state["stop"]:
        if tc.max_steps and state["step"] >= tc.max_steps:  # a resumed run that had already finished
            state["stop"] = f"max_steps={tc.max_steps} reached"
            break
        if tc.max_epochs and state["epoch"] >= tc.max_epochs:
            state["stop"] = f"max_epochs={tc.max_epochs} reached"
            break
        for index in dist.shard(sampler.batches(state["epoch"]), world)[state["batch_in_epoch"] :]:
            t0 = time.perf_counter()
            result = train_step(
                model, optimizer, sampler.collate(index).to(device), tc.label_smoothing, tc.clip_grad_norm,
                forward, cast, lambda bad: dist.any_rank(bad, world),
            )
            state["step"] += 1
            state["batch_in_epoch"] += 1
            bar.update(1)
            if not result.finite:
                state["nonfinite_in_row"] += 1
                state["skipped_steps"] += 1
                log.warning("step %d: non-finite loss or gradient (loss %s, gradient norm %s): update skipped (%d in a row)",
                            state["step"], result.loss, result.grad_norm, state["nonfinite_in_row"])
                if state["nonfinite_in_row"] >= tc.max_nonfinite_steps:
                    raise UserError(
                        f"training diverged: {state['nonfinite_in_row']} steps in a row with a non-finite loss or gradient "
                        f"(up to step {state['step']}); lower train.lr or set train.clip_grad_norm, and check the data"
                    )
            else:
                state["nonfinite_in_row"] = 0
                window_tokens += result.tokens
                window_loss += result.loss
            window_time += time.perf_counter() - t0
            if state["step"] % tc.log_every == 0 and window_tokens:
                speed = window_tokens * world.size / max(window_time, 1e-9)
                speeds.append(speed)
                if writer is not None:
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
            if tc.max_minutes and dist.any_rank(elapsed() >= tc.max_minutes * 60, world):
                state["stop"] = state["stop"] or f"max_minutes={tc.max_minutes} reached"
            if state["stop"]:
                break
        else:
            state["epoch"] += 1
            state["batch_in_epoch"] = 0
    bar.close()
    if state["step"] % tc.valid_every != 0:
        run_validation()
    state["minutes"] = elapsed() / 60
    digests = dist.gather_digests(model, world)
    if writer is None:
        return state
    writer.close()
    log.info("stopped after %d steps (%.1f min): %s; best valid BLEU %.2f at step %s",
             state["step"], state["minutes"], state["stop"], state["best_bleu"], state["best"].get("step"))
    write_metrics(cfg, run_dir, state, n_params, float(np.median(speeds)) if speeds else 0.0, digests)
    return state
