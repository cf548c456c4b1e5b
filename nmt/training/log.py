"""What a training run logs: per-step losses gathered into windows of `train.log_every` steps
(TensorBoard scalars and the progress bar), and at each validation its metrics and attention
heatmaps. Only rank 0 has a writer; the other processes keep counting."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from nmt.alignment.heatmap import heatmap_figure
from nmt.alignment.words import SentenceAlignment
from nmt.system.files import disk_full, no_space

F = TypeVar("F", bound=Callable[..., Any])


def _names_a_full_disk(method: F) -> F:
    """A write into the events file that finds the disk full is a UserError naming that file (the
    writer's thread raises a bare OSError, with no file name, on a later call)."""

    @functools.wraps(method)
    def wrapper(self: TrainingLog, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as err:
            if self.writer is None or no_space(err) is None:
                raise
            raise disk_full(self.events_file(), "the events written before are kept") from None

    return wrapper  # type: ignore[return-value]


@dataclass
class _Window:
    """Loss, tokens and time since the last training log line."""

    tokens: int = 0
    loss: float = 0.0
    guided: float = 0.0
    seconds: float = 0.0
    speeds: list[float] = field(default_factory=list)  # tokens/s of every window, for the median


def progress_bar(enabled: bool, first_step: int, max_steps: int, max_minutes: float, minutes_before: float) -> tqdm:
    """A bar that knows the budget: under a time budget (`max_minutes`), the minutes spent of it and
    an estimate of the end; under a step budget alone, the steps; otherwise a step count."""
    if max_minutes:
        return tqdm(total=max_minutes, initial=minutes_before, disable=not enabled, unit="min", dynamic_ncols=True,
                    bar_format="{l_bar}{bar}| {n:.1f}/{total:g} min [{elapsed}<{remaining}{postfix}]")
    return tqdm(total=max_steps or None, initial=first_step, disable=not enabled, unit="step", dynamic_ncols=True)


class TrainingLog:
    """TensorBoard events in `folder` (when `write`) and a progress bar (`bar`). A resumed run
    (`first_step` > 0) drops the events a killed run wrote past its checkpoint."""

    def __init__(self, folder: Path, write: bool, progress: bool, first_step: int, resumed: bool, max_steps: int, max_minutes: float,
                 minutes_before: float) -> None:
        try:
            self.writer = SummaryWriter(str(folder), purge_step=first_step + 1 if resumed else None) if write else None
        except Exception as err:
            if no_space(err) is None:
                raise
            raise disk_full(folder / "events.out.tfevents", "no events were written") from None
        self.bar = progress_bar(progress, first_step, max_steps, max_minutes, minutes_before)
        self.timed = bool(max_minutes)  # the bar counts minutes, not steps
        self.window = _Window()

    def events_file(self) -> Path:
        """The events file this run writes (the newest in the folder)."""
        assert self.writer is not None
        folder = Path(self.writer.get_logdir())
        return max(folder.glob("events.out.tfevents.*"), key=lambda p: p.stat().st_mtime_ns, default=folder / "events.out.tfevents")

    def step(self, tokens: int, loss: float, guided: float, seconds: float, elapsed_s: float) -> None:
        """Count a step (tokens and losses of a finite step; 0 for a skipped one) that took
        `seconds`, ending at `elapsed_s` seconds of training."""
        w = self.window
        w.tokens, w.loss, w.guided, w.seconds = w.tokens + tokens, w.loss + loss, w.guided + guided, w.seconds + seconds
        self.bar.update(min(elapsed_s / 60, self.bar.total) - self.bar.n if self.timed else 1)

    @_names_a_full_disk
    def flush_window(self, step: int, epoch: int, lr: float, processes: int, guide_weight: float | None) -> None:
        """Log the window's mean loss, perplexity, rate and speed at `step`, and start a new window."""
        w = self.window
        if not w.tokens:
            return
        speed = w.tokens * processes / max(w.seconds, 1e-9)
        w.speeds.append(speed)
        if self.writer is not None:
            self.writer.add_scalar("train/loss", w.loss / w.tokens, step)
            self.writer.add_scalar("train/ppl", math.exp(min(w.loss / w.tokens, 50)), step)
            self.writer.add_scalar("train/lr", lr, step)
            self.writer.add_scalar("train/tokens_per_s", speed, step)
            if guide_weight is not None:
                self.writer.add_scalar("train/guided_alignment", w.guided / w.tokens, step)
                self.writer.add_scalar("train/guided_alignment_weight", guide_weight, step)
        self.bar.set_postfix_str(f"step {step}, epoch {epoch}, loss {w.loss / w.tokens:.3f}, {speed:.0f} tok/s")
        w.tokens, w.loss, w.guided, w.seconds = 0, 0.0, 0.0, 0.0

    @_names_a_full_disk
    def validation(self, step: int, metrics: dict[str, float], examples: list[SentenceAlignment]) -> None:
        """Validation scalars and the heatmaps of the fixed example sentences."""
        if self.writer is None:
            return
        for key, value in metrics.items():
            self.writer.add_scalar(f"valid/{key}", value, step)
        for k, example in enumerate(examples):
            fig = heatmap_figure(example.matrix, example.src_pieces, example.tgt_pieces, f"step {step}")
            self.writer.add_figure(f"attention/{k}", fig, step, close=False)
        self.writer.flush()

    @property
    def median_speed(self) -> float:
        return float(np.median(self.window.speeds)) if self.window.speeds else 0.0

    @_names_a_full_disk
    def close(self) -> None:
        self.bar.close()
        if self.writer is not None:
            self.writer.close()
