"""One training in a run directory (`train`): hold the directory, refuse what it cannot continue
before writing anything, set up the process, run the `Trainer`, and turn Ctrl-C into `Interrupted`."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

from nmt.config.schema import Config
from nmt.system import distributed as dist
from nmt.system.errors import Interrupted, UserError
from nmt.system.runtime import configure_allocator, resolve_device, seed_everything, set_threads
from nmt.training.interrupts import stop_on
from nmt.training.loop import Trainer
from nmt.training.resume import TrainingState, check_continuable, hold_run_dir

NOTHING_TO_RESUME = ": nothing to resume"  # how a training stopped before its first checkpoint ends its line
BEFORE_THE_FIRST_STEP = f"interrupted before the first step{NOTHING_TO_RESUME}"


def interrupted(run_dir: Path, step: int, saved_step: int | None) -> Interrupted:
    """What a training stopped by Ctrl-C says: where it stopped, and how to continue."""
    if saved_step is None:
        return Interrupted(f"interrupted at step {step}, before its first checkpoint{NOTHING_TO_RESUME}")
    return Interrupted(f"interrupted at step {step}; resume with train.resume=auto hydra.run.dir={run_dir} "
                       f"(it continues from checkpoints/last.pt, step {saved_step})")


def train(cfg: Config, run_dir: Path, on_start: Callable[[], None] | None = None) -> TrainingState:
    """Train a model as `cfg` says, writing checkpoints and TensorBoard events into `run_dir`, which
    it holds for itself (a second training there is refused). Nothing is written there before the
    run it holds is known to be one this config continues, or none (`check_continuable`, and the
    checkpoint's config and vocabulary); `on_start` runs then. Ctrl-C ends it with `Interrupted`.
    Returns the final state: step, epoch, best validation metrics, stop reason."""
    if cfg.train.ensemble_size != 1:
        raise UserError(f"train.ensemble_size={cfg.train.ensemble_size}: nmt.training.loop.train trains one model; "
                        "nmt.training.ensemble.train_ensemble trains ensembles")
    run_dir = Path(run_dir)
    trainer: Trainer | None = None
    try:  # from the first instant: a Ctrl-C while the process is set up ends in one line too
        with stop_on(signal.SIGINT), hold_run_dir(run_dir):
            if dist.env_rank() == 0:
                check_continuable(cfg, run_dir)
            seed_everything(cfg.seed)
            configure_allocator()
            set_threads(cfg.train.threads)
            world = dist.init_world(resolve_device(cfg.train.device))
            try:
                trainer = Trainer(cfg, run_dir, world)
                trainer.resume()
                if on_start is not None:
                    on_start()
                return trainer.run()
            finally:
                dist.shutdown(world)
    except KeyboardInterrupt:
        if trainer is None:
            raise Interrupted(BEFORE_THE_FIRST_STEP) from None
        raise interrupted(run_dir, trainer.state.step, trainer.saved_step) from None
