"""Owning a run directory, continuing a run (`train.resume`) and starting from another model
(`train.init_from`).

A resumed run must be indistinguishable from one that never stopped: `checkpoints/last.pt`
holds, besides the model and optimiser, the RNG states (dropout, Gumbel noise and REINFORCE
samples draw from them), the position in the epoch's batch order, the step, the best-so-far
BLEU and the early-stopping count. Only tensors and plain Python values go in, so the
checkpoint still loads with `weights_only=True`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import socket
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from nmt.config.schema import Config
from nmt.model.checkpoint import Checkpoint, load_checkpoint, predated_config, tensor_bytes
from nmt.model.seq2seq import Seq2Seq
from nmt.system.errors import UserError
from nmt.system.files import Busy, atomic_write_bytes, file_lock, remove_orphans

log = logging.getLogger(__name__)

# Config sections that must match for a checkpoint's weights and data order to fit this run.
# `train.*` may differ (e.g. a larger max_minutes to continue a finished run).
_MUST_MATCH = ("seed", "data", "model")
# model.init_range only draws the starting weights, which a resumed run replaces with the checkpoint's.
_MAY_DIFFER = {"data.batch_tokens", "data.cache_dir", "data.url", "data.dir", "model.init_range"}


@dataclass
class TrainingState:
    """The loop's counters. All of it but `stop` goes into every checkpoint, so that a resumed run
    continues exactly where the checkpoint was written."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # batches of the current epoch already trained on
    best_bleu: float = -1.0
    best: dict[str, float] = field(default_factory=dict)  # the best validation's metrics and step
    stopping_best: float = math.inf  # the best value of train.early_stopping_metric so far, as lower-is-better
    bad_validations: int = 0  # since stopping_best improved (early stopping)
    elapsed_s: float = 0.0  # training wall-clock time, over every resumption
    nonfinite_in_row: int = 0
    skipped_steps: int = 0
    # what the run trains in ("fp32" or "bf16"; "" until chosen): train.precision=auto times the step
    # when a run starts, and a resumed run keeps that choice, so it goes on exactly as it would have
    precision: str = ""
    stop: str = ""  # why training stopped ("" while it runs)

    def saved(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "stop"}

    @classmethod
    def restored(cls, saved: dict[str, Any]) -> TrainingState:
        names = {f.name for f in fields(cls)} - {"stop"}
        return cls(**{k: v for k, v in saved.items() if k in names})

    @property
    def minutes(self) -> float:
        return self.elapsed_s / 60


class RunDirectoryBusy(UserError):
    log_to_run = False  # the run directory's log belongs to the training that holds it


class RunNotContinued(UserError):
    log_to_run = False  # the run directory's log belongs to the run this training would not continue


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


def rng_state() -> dict[str, Any]:
    """Every random generator the training step can touch, as plain Python values (lists of
    ints): they pass through `weights_only` loading and between processes alike."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (kind, np.asarray(keys).tolist(), pos, has_gauss, cached),
        "torch": torch.get_rng_state().tolist(),
    }
    if torch.cuda.is_available():
        state["cuda"] = [s.tolist() for s in torch.cuda.get_rng_state_all()]
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Inverse of `rng_state`."""
    random.setstate(_as_tuples(state["python"]))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.tensor(state["torch"], dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([torch.tensor(s, dtype=torch.uint8) for s in state["cuda"]])


def _as_tuples(value: Any) -> Any:
    # random.setstate wants tuples; a checkpoint round-trip may hand back lists.
    return tuple(_as_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def resume_checkpoint(resume: str, run_dir: Path) -> Path | None:
    """The checkpoint to continue from, or None to start afresh.

    `resume=""`: never. `resume="auto"`: `{run_dir}/checkpoints/last.pt` when it exists (give the
    same `hydra.run.dir` again to continue a run), else a fresh start. Any other value is a run
    directory or a checkpoint file, which must exist.
    """
    if not resume:
        return None
    if resume == "auto":
        last = run_dir / "checkpoints" / "last.pt"
        return last if last.is_file() else None
    path = Path(resume)
    if path.is_dir():
        path = path / "checkpoints" / "last.pt"
    if not path.is_file():
        raise UserError(f"train.resume={resume}: no checkpoint at {path}")
    return path


def held_run(run_dir: Path) -> tuple[int, Path] | None:
    """The trained run `run_dir` holds, if any: (its number of models, a checkpoint of it). An
    ensemble run has a folder model{k} per model; a one-model run its checkpoints/ alone. A folder
    whose run wrote no checkpoint yet holds nothing a new run could lose. The checkpoint named is
    best.pt or last.pt where there is one (what a user knows), before average.pt and step-N.pt."""

    def named_first(path: Path) -> tuple[bool, str]:
        return path.name not in ("best.pt", "last.pt"), str(path)

    members = sorted(run_dir.glob("model[0-9]*/checkpoints/*.pt"), key=named_first)
    if members:
        return len([p for p in run_dir.glob("model[0-9]*") if p.is_dir()]), members[0]
    found = sorted((run_dir / "checkpoints").glob("*.pt"), key=named_first)
    return (1, found[0]) if found else None


def _models(n: int) -> str:
    return "one model's run" if n == 1 else f"an ensemble run of {n} models"


def check_continuable(cfg: Config, run_dir: Path) -> None:
    """Before anything is written into `run_dir`: refuse a training that would write over a run it
    does not continue. A fresh start (`train.resume=""`, or another run's resume) needs a run
    directory without a trained run in it; a resume needs the run it continues to have as many
    models as `train.ensemble_size` trains (the settings each model's checkpoint must share are
    checked when it is loaded: `check_compatible`, `check_same_vocabulary`)."""
    size, resume = cfg.train.ensemble_size, cfg.train.resume
    source = None if not resume else run_dir if resume == "auto" else Path(resume)
    if source is not None and source.is_file():  # a checkpoint file: its run directory
        source = source.parent.parent if source.parent.name == "checkpoints" else None
    here = held_run(run_dir)
    if here is not None and (source is None or source.resolve() != run_dir.resolve()):
        raise RunNotContinued(
            f"{run_dir} already holds {_models(here[0])} ({here[1]}); continue it with train.resume=auto, "
            "or choose another hydra.run.dir"
        )
    there = held_run(source) if source is not None else None
    if there is not None and there[0] != size:
        raise RunNotContinued(
            f"train.ensemble_size={size} cannot continue {source}: it holds {_models(there[0])}; resume it with "
            f"train.ensemble_size={there[0]}, or start a new run in another hydra.run.dir"
        )


def check_compatible(saved: dict[str, Any], cfg: Config, path: Path, sections: tuple[str, ...] = _MUST_MATCH) -> None:
    """Raise a UserError naming every setting in `sections` where the checkpoint's config differs."""
    current = OmegaConf.to_container(OmegaConf.structured(cfg), resolve=True, enum_to_str=True)
    defaults = OmegaConf.to_container(predated_config(), resolve=True, enum_to_str=True)
    assert isinstance(current, dict) and isinstance(defaults, dict)
    diffs = [
        f"{key}: checkpoint {old!r}, now {new!r}"
        for section in sections
        for key, old, new in _differences(section, _with_defaults(saved.get(section), defaults.get(section)), current.get(section))
        if key not in _MAY_DIFFER
    ]
    if diffs:
        raise UserError(f"{path}: checkpoint comes from an incompatible config ({'; '.join(diffs)})")


def _with_defaults(saved: Any, defaults: Any) -> Any:
    """A saved config section with the settings it predates filled in from `defaults`: the values
    a checkpoint written before an option existed ran with (the option's default, or its entry in
    nmt.model.checkpoint.BEFORE_IT_EXISTED)."""
    if not (isinstance(saved, dict) and isinstance(defaults, dict)):
        return saved
    return {**{k: v for k, v in defaults.items() if k not in saved}, **{k: _with_defaults(v, defaults.get(k)) for k, v in saved.items()}}


def _differences(prefix: str, old: Any, new: Any) -> list[tuple[str, Any, Any]]:
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in sorted(set(old) | set(new)) for d in _differences(f"{prefix}.{k}", old.get(k), new.get(k))]
    return [] if old == new else [(prefix, old, new)]


def check_same_vocabulary(checkpoint: Checkpoint, src_proto: bytes, tgt_proto: bytes, what: str) -> None:
    """Token ids must mean the same pieces: the checkpoint's subword models must be this run's."""
    if tensor_bytes(checkpoint.src_spm) != src_proto or tensor_bytes(checkpoint.tgt_spm) != tgt_proto:
        raise UserError(f"{what}: the checkpoint's subword vocabulary differs from this run's data")


def load_resumable(path: Path, cfg: Config, src_proto: bytes, tgt_proto: bytes, device: str | torch.device = "cpu") -> Checkpoint:
    """The checkpoint at `path`, checked to be one that `cfg` continues: one model's, with its
    training state, of the same model, data and seed settings and the same subword vocabulary."""
    checkpoint = load_checkpoint(path, device)
    check_compatible(checkpoint.config, cfg, path)
    check_same_vocabulary(checkpoint, src_proto, tgt_proto, str(path))
    if checkpoint.members:
        n = len(checkpoint.members) + 1
        raise UserError(f"{path}: an ensemble's checkpoint of {n} models holds no training state; "
                        f"resume the ensemble's run directory with train.ensemble_size={n}")
    if checkpoint.train_state is None or checkpoint.optimizer is None or checkpoint.scheduler is None or checkpoint.rng is None:
        raise UserError(f"{path}: checkpoint holds no training state to resume from")
    return checkpoint


def init_weights(model: Seq2Seq, path: str, src_proto: bytes, tgt_proto: bytes) -> None:
    """`train.init_from`: copy another run's weights into `model` (a new run: fresh optimiser, step 0)."""
    checkpoint = load_checkpoint(path)
    check_same_vocabulary(checkpoint, src_proto, tgt_proto, f"train.init_from={path}")
    try:
        model.load_state_dict(checkpoint.model)
    except RuntimeError as err:
        first = str(err).strip().splitlines()
        raise UserError(f"train.init_from={path}: weights do not fit this model ({' '.join(first[:3])})") from None
    log.info("initialised weights from %s (step %s)", path, checkpoint.step)


def adopt_checkpoints(path: Path, folder: Path) -> None:
    """A run continued from another run's checkpoint `path` starts with that run's checkpoints in
    its own `folder` (last.pt = `path`, and its best.pt), so that it is a complete run even if it
    trains no further step (a finished run continued with the same budget)."""
    if path.parent.resolve() == folder.resolve():
        return
    for name, source in (("last.pt", path), ("best.pt", path.with_name("best.pt"))):
        if source.is_file():
            atomic_write_bytes(folder / name, source.read_bytes())
