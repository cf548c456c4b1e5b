"""The training loop, in four parts: set-up (`Trainer.__init__`), resume (`Trainer.resume`),
step-and-log (`Trainer._train_on`) and validate-and-checkpoint (`Trainer._validate`).

A `Trainer` prepares the data, builds the model, and trains with Adam, gradient-norm clipping and
label smoothing; the learning rate follows `train.schedule` (by default a warm-up, then a cosine
decay that reaches `train.min_lr` when the budget is spent; `plateau`: halved when the validation
BLEU stops improving). Every `train.valid_every` steps it measures validation loss and BLEU, keeps
`checkpoints/best.pt` (the best BLEU) and `checkpoints/last.pt` (with everything needed to resume
exactly), and stops early (`train.early_stopping_metric`, by default the validation loss, no longer
improving), at `max_steps`, `max_epochs` or `max_minutes`. Under torchrun it trains
data-parallel; rank 0 writes. `nmt.training.session.train` runs one in a run directory.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from torch.nn.parallel import DistributedDataParallel

from nmt.alignment.guidance import Guidance, build_guidance, guide_weight
from nmt.config.schema import Config, Schedule, StopMetric
from nmt.data.batching import BatchSampler, RaggedIds
from nmt.data.prepare import PreparedData, prepare
from nmt.data.sampling import EpochPrefetch, SegmentationSampler
from nmt.decoding.splits import fit_sources
from nmt.model.build import build_model
from nmt.model.checkpoint import Checkpoint, bytes_tensor, save_checkpoint
from nmt.system import distributed as dist
from nmt.system.errors import UserError
from nmt.system.runtime import precision_dtype, resolve_device, seed_everything
from nmt.training.averaging import ParameterAverage
from nmt.training.interrupts import INTERRUPTS
from nmt.training.log import TrainingLog
from nmt.training.metrics import write_metrics
from nmt.training.precision import cpu_trains_faster_in_bf16, first_batches
from nmt.training.resume import (
    TrainingState,
    adopt_checkpoints,
    init_weights,
    load_resumable,
    restore_rng,
    resume_checkpoint,
    rng_state,
)
from nmt.training.schedule import BudgetSchedule, budget_steps
from nmt.training.selection import select_best
from nmt.training.step import StepResult, train_step
from nmt.training.validation import attention_examples, check_gold, validate

log = logging.getLogger(__name__)

# What early stopping compares, as lower-is-better values of a validation's metrics.
STOPPING_VALUES: dict[StopMetric, Callable[[dict[str, float]], float]] = {
    StopMetric.loss: lambda metrics: metrics["loss"],
    StopMetric.bleu: lambda metrics: -metrics["bleu"],
}


class Trainer:
    """One training run: set up by the constructor, continued or initialised by `resume`, run by `run`."""

    def __init__(self, cfg: Config, run_dir: Path, world: dist.World) -> None:
        self.cfg, self.run_dir, self.world = cfg, run_dir, world
        tc = cfg.train
        self.device = dist.local_device(resolve_device(tc.device), world)
        self.data = self._prepare_data()
        self.sampler = BatchSampler(
            self.data.split("train"), cfg.data.batch_tokens, shuffle=True, seed=cfg.seed, max_sentences=cfg.data.batch_sentences
        )
        if len(self.sampler) < world.size:
            raise UserError(f"{len(self.sampler)} training batches cannot be shared by {world.size} processes; lower data.batch_tokens")
        self.model = build_model(cfg.model, len(self.data.src_tokenizer), len(self.data.tgt_tokenizer)).to(self.device)
        self.valid = fit_sources(self.data.split("valid"), self.model, f"{self.data.folder.name}-valid", "valid")
        self.guidance = build_guidance(cfg, self.data) if tc.guided_alignment.weight else None
        self.epoch_guidance = self.guidance  # the targets of the current epoch's segmentation
        d = cfg.data
        self.segmenter = SegmentationSampler(self.data.split("train"), self.data.src_tokenizer, self.data.tgt_tokenizer,
                                             d.sampling_alpha, d.sampling_nbest, d.max_len, cfg.seed) if d.sampling_alpha else None
        self.segmentations = EpochPrefetch(self._segmentation) if self.segmenter is not None else None
        self.ema = ParameterAverage(self.model, tc.ema_decay) if tc.ema_decay else None
        self.n_params = sum(p.numel() for p in self.model.parameters())
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=tc.lr, weight_decay=tc.weight_decay)
        self.scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            self.optimizer, mode="max", factor=tc.lr_decay_factor, patience=tc.lr_decay_patience, min_lr=tc.min_lr
        )
        self.budget = None if tc.schedule == Schedule.plateau else BudgetSchedule(
            tc.schedule, tc.lr, tc.min_lr, tc.warmup_steps, budget_steps(tc, dist.shard_size(len(self.sampler), world)), tc.max_minutes * 60
        )
        self.resolved = OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True, enum_to_str=True)
        self.state = TrainingState()
        self.resumed = False
        self.saved_step: int | None = None  # the step of checkpoints/last.pt, once there is one
        self.forward: DistributedDataParallel | None = None
        self.cast: torch.dtype | None = None  # bf16 autocast or plain fp32: chosen by `resume`
        self.started, self.elapsed_before = time.monotonic(), 0.0

    def _choose_precision(self) -> torch.dtype | None:
        """train.precision's autocast dtype (None: fp32), recorded in the state. `auto` on a CPU times
        this model's step (rank 0's measurement for all) when the run starts; a resumed run keeps
        what it started in, since the timing may come out otherwise on another host or minute."""
        setting = self.cfg.train.precision.value
        if setting == "auto" and self.state.precision:
            setting = self.state.precision
        cast = precision_dtype(setting, self.device, lambda: dist.from_main(self._trains_faster_in_bf16, self.world))
        self.state.precision = "bf16" if cast is not None else "fp32"
        return cast

    def _trains_faster_in_bf16(self) -> bool:
        batches = [batch.to(self.device) for batch in first_batches(self.sampler)]
        return cpu_trains_faster_in_bf16(self.model, batches, self.cfg.train.label_smoothing)

    def _segmentation(self, epoch: int) -> tuple[RaggedIds, RaggedIds, Guidance | None]:
        """Subword regularisation: epoch `epoch`'s sampled ids, and guided alignment's targets for them."""
        assert self.segmenter is not None
        src, tgt = self.segmenter.draw(epoch)
        return src, tgt, self.guidance.for_ids(src, tgt) if self.guidance is not None else None

    def _prepare_data(self) -> PreparedData:
        """One process fills the data cache (and checks it); the others then read it."""
        data = prepare_checked(self.cfg) if self.world.is_main else None
        dist.barrier(self.world)
        return data if data is not None else prepare(self.cfg.data)

    def resume(self) -> None:
        """Continue the run `train.resume` names, or start from `train.init_from`'s weights."""
        tc, data = self.cfg.train, self.data
        path = dist.from_main(lambda: resume_checkpoint(tc.resume, self.run_dir), self.world)
        if path is not None:
            self._continue_from(path)
        elif tc.init_from:
            init_weights(self.model, tc.init_from, data.src_tokenizer.model_proto, data.tgt_tokenizer.model_proto)
        self.cast = self._choose_precision()
        if self.world.distributed and not self.resumed:
            seed_everything(self.cfg.seed + self.world.rank)  # different dropout masks per replica (weights are already equal)

    def _continue_from(self, path: Path) -> None:
        checkpoint = load_resumable(path, self.cfg, self.data.src_tokenizer.model_proto, self.data.tgt_tokenizer.model_proto, self.device)
        assert checkpoint.optimizer is not None and checkpoint.scheduler is not None and checkpoint.train_state is not None
        assert checkpoint.rng is not None
        self.model.load_state_dict(checkpoint.model)
        self.optimizer.load_state_dict(checkpoint.optimizer)
        self.scheduler.load_state_dict(checkpoint.scheduler)
        self.state = TrainingState.restored(checkpoint.train_state)
        if self.ema is not None and checkpoint.ema:
            self.ema.restore(checkpoint.ema)
        if len(checkpoint.rng) == self.world.size:
            restore_rng(checkpoint.rng[self.world.rank])
        else:
            log.warning("%s was written by %d processes, now %d: the random streams restart", path, len(checkpoint.rng), self.world.size)
        self.resumed = True
        self.saved_step = self.state.step
        if self.world.is_main:
            adopt_checkpoints(path, self.run_dir / "checkpoints")
            log.info("resumed %s at step %d (epoch %d, batch %d)", path, self.state.step, self.state.epoch, self.state.batch_in_epoch)

    def run(self) -> TrainingState:
        """Train until a stop rule fires; validate a last time; write metrics.json. -> the final state."""
        tc = self.cfg.train
        if tc.compile:
            self.model.decoder.compile_step()
        if self.world.distributed:
            self.forward = DistributedDataParallel(self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        if self.world.is_main:
            log.info("model: %d parameters; %d training batches per epoch; %s%s, %d process(es)", self.n_params, len(self.sampler),
                     self.device, " bf16 autocast" if self.cast else " fp32", self.world.size)
        self.started, self.elapsed_before = time.monotonic(), self.state.elapsed_s
        self.log = TrainingLog(self.run_dir / "tensorboard", self.world.is_main, tc.progress and self.world.is_main, self.state.step,
                               self.resumed, tc.max_steps, tc.max_minutes, self.elapsed_before / 60)
        self.model.train()
        try:
            while not self.state.stop and not self._budget_spent():
                self._run_epoch()
            if self.state.step % tc.valid_every != 0:
                self._validate()
        except BaseException:  # Ctrl-C, a full disk, ...: keep the events logged so far
            with contextlib.suppress(Exception):
                self.log.close()
            raise
        finally:
            if self.segmentations is not None:
                self.segmentations.close()
        return self._finish()

    def _elapsed(self) -> float:
        return self.elapsed_before + time.monotonic() - self.started

    def _budget_spent(self) -> bool:
        """Checked before each epoch: a resumed run may have finished already."""
        tc, st = self.cfg.train, self.state
        if tc.max_steps and st.step >= tc.max_steps:
            st.stop = f"max_steps={tc.max_steps} reached"
        elif tc.max_epochs and st.epoch >= tc.max_epochs:
            st.stop = f"max_epochs={tc.max_epochs} reached"
        elif tc.max_minutes and dist.any_rank(self._elapsed() >= tc.max_minutes * 60, self.world):
            st.stop = f"max_minutes={tc.max_minutes} reached"
        return bool(st.stop)

    def _run_epoch(self) -> None:
        """The rest of the current epoch's batches (this process's share), in its seeded order."""
        if self.segmentations is not None:
            src, tgt, self.epoch_guidance = self.segmentations.get(self.state.epoch)
            self.sampler.use_ids(src, tgt)
        for index in dist.shard(self.sampler.batches(self.state.epoch), self.world)[self.state.batch_in_epoch :]:
            self._train_on(index)
            if self.state.stop:
                return
        self.state.epoch += 1
        self.state.batch_in_epoch = 0

    def _train_on(self, index: np.ndarray) -> None:
        """One step on the batch of rows `index`; then logging, validation and the stop rules it calls for."""
        tc, st = self.cfg.train, self.state
        INTERRUPTS.check()
        t0 = time.perf_counter()
        if self.budget is not None:
            # a time budget: every replica reads the same clock (one collective), so all take the same rate
            seconds = dist.longest(self._elapsed(), self.world) if self.budget.max_seconds else 0.0
            self.budget.apply(self.optimizer, st.step, seconds)
        batch = self.sampler.collate(index)
        if self.epoch_guidance is not None:
            batch.guide = self.epoch_guidance.batch(index, batch.src.size(1), batch.tgt_in.size(1))
        result = train_step(self.model, self.optimizer, batch.to(self.device), tc.label_smoothing, tc.clip_grad_norm, self.forward,
                            self.cast, lambda bad: dist.any_rank(bad, self.world), guide_weight(tc.guided_alignment, st.step))
        if self.ema is not None and result.finite:
            self.ema.update(self.model)
        st.step += 1
        st.batch_in_epoch += 1
        self._count(result)
        self.log.step(result.tokens if result.finite else 0, result.loss if result.finite else 0.0, result.guided,
                      time.perf_counter() - t0, self._elapsed())
        if st.step % tc.log_every == 0:
            guided = guide_weight(tc.guided_alignment, st.step) if self.guidance is not None else None
            self.log.flush_window(st.step, st.epoch, self.optimizer.param_groups[0]["lr"], self.world.size, guided)
        if st.step % tc.valid_every == 0:
            self._validate()
        if tc.max_steps and st.step >= tc.max_steps:
            st.stop = st.stop or f"max_steps={tc.max_steps} reached"
        if tc.max_minutes and dist.any_rank(self._elapsed() >= tc.max_minutes * 60, self.world):
            st.stop = st.stop or f"max_minutes={tc.max_minutes} reached"

    def _count(self, result: StepResult) -> None:
        """Add a step to the log window; a skipped (non-finite) one to the count that stops a diverged run."""
        st = self.state
        if result.finite:
            st.nonfinite_in_row = 0
            return
        st.nonfinite_in_row += 1
        st.skipped_steps += 1
        log.warning("step %d: non-finite loss or gradient (loss %s, gradient norm %s): update skipped (%d in a row)",
                    st.step, result.loss, result.grad_norm, st.nonfinite_in_row)
        if st.nonfinite_in_row >= self.cfg.train.max_nonfinite_steps:
            raise UserError(
                f"training diverged: {st.nonfinite_in_row} steps in a row with a non-finite loss or gradient "
                f"(up to step {st.step}); lower train.lr or set train.clip_grad_norm, and check the data"
            )

    def _validate(self) -> None:
        """Validation metrics; the learning-rate schedule and the stop rules that follow them; then
        (rank 0) TensorBoard scalars and heatmaps, best.pt when it improved, and last.pt."""
        tc, st = self.cfg.train, self.state
        with self._evaluated():
            metrics = dist.from_main(lambda: validate(self.model, self.valid, self.data, self.cfg, self.device), self.world)
        improved = metrics["bleu"] > st.best_bleu  # best.pt: the best validation BLEU
        if improved:
            st.best_bleu, st.best = metrics["bleu"], dict(metrics, step=st.step)
        watched = STOPPING_VALUES[tc.early_stopping_metric](metrics)
        if watched < st.stopping_best:
            st.stopping_best, st.bad_validations = watched, 0
        else:
            st.bad_validations += 1
        if self.budget is None:
            self.scheduler.step(metrics["bleu"])
        if tc.stop_at_exact_match and metrics["exact_match"] >= tc.stop_at_exact_match:
            st.stop = f"validation exact match {metrics['exact_match']:.3f} >= {tc.stop_at_exact_match}"
        elif tc.early_stopping_patience and st.bad_validations >= tc.early_stopping_patience:
            st.stop = (f"early stopping: no better validation {tc.early_stopping_metric.value} "
                       f"in {tc.early_stopping_patience} validations")
        st.elapsed_s = self._elapsed()
        rngs = dist.gather_objects(rng_state(), self.world)  # every rank's generators, for an exact resume
        if not self.world.is_main:
            return
        with self._evaluated():
            examples = attention_examples(self.model, self.valid, self.data, self.cfg.log.attention_examples, self.device)
        self.log.validation(st.step, metrics, examples)
        if improved:
            self._checkpoint("best.pt", metrics, rngs)
        self._checkpoint("last.pt", metrics, rngs)  # last: it is what a resume reads
        self.saved_step = st.step
        if tc.keep_checkpoints:
            self._keep_step_checkpoint(metrics)
        log.info("step %d valid: loss %.3f ppl %.2f BLEU %.2f chrF %.2f exact %.3f%s", st.step, metrics["loss"], metrics["ppl"],
                 metrics["bleu"], metrics["chrf"], metrics["exact_match"], " (best)" if improved else "")

    def _evaluated(self) -> contextlib.AbstractContextManager[None]:
        """Inside: the model holds the weights validation measures (the moving average, if kept)."""
        return self.ema.swapped_into(self.model) if self.ema is not None else contextlib.nullcontext()

    def _weights(self, metrics: dict[str, float]) -> Checkpoint:
        st, data = self.state, self.data
        return Checkpoint(
            model=self.model.state_dict(), config=self.resolved,  # type: ignore[arg-type]
            src_spm=bytes_tensor(data.src_tokenizer.model_proto), tgt_spm=bytes_tensor(data.tgt_tokenizer.model_proto),
            step=st.step, epoch=st.epoch, metrics=metrics, best_bleu=st.best_bleu, n_params=self.n_params,
            ema=self.ema.state() if self.ema is not None else None,
        )

    def _checkpoint(self, name: str, metrics: dict[str, float], rngs: list[Any]) -> None:
        checkpoint = self._weights(metrics)
        checkpoint.optimizer, checkpoint.scheduler = self.optimizer.state_dict(), self.scheduler.state_dict()
        checkpoint.train_state, checkpoint.rng = self.state.saved(), rngs
        with INTERRUPTS.deferred():  # Ctrl-C waits for the write's end
            save_checkpoint(self.run_dir / "checkpoints" / name, checkpoint)

    def _keep_step_checkpoint(self, metrics: dict[str, float]) -> None:
        """checkpoints/step-N.pt (weights only) of this validation; only the newest train.keep_checkpoints stay."""
        folder = self.run_dir / "checkpoints"
        with INTERRUPTS.deferred():  # Ctrl-C waits for the write's end
            save_checkpoint(folder / f"step-{self.state.step:07d}.pt", self._weights(metrics))
        for old in sorted(folder.glob("step-*.pt"))[: -self.cfg.train.keep_checkpoints]:
            old.unlink()

    def _finish(self) -> TrainingState:
        st = self.state
        st.elapsed_s = self._elapsed()
        digests = dist.gather_digests(self.model, self.world)
        self.log.close()
        if not self.world.is_main:
            return st
        log.info("stopped after %d steps (%.1f min): %s; best valid BLEU %.2f at step %s",
                 st.step, st.minutes, st.stop, st.best_bleu, st.best.get("step"))
        selection = select_best(self.cfg, self.run_dir / "checkpoints") if self.cfg.train.select_at_end and st.best else None
        write_metrics(self.cfg, self.run_dir, st, self.n_params, self.log.median_speed, digests, selection)
        return st


def prepare_checked(cfg: Config) -> PreparedData:
    """The run's data, prepared (filling the cache), with every split and gold file the run will
    read checked before the first step (the test split only if it is tested at the end)."""
    splits = ("valid", "test") if cfg.train.test_at_end else ("valid",)
    data = prepare(cfg.data)
    data.check_ready(splits)
    for split in splits:
        check_gold(data, split)
    return data
