"""Learning-rate schedules. `linear` and `cosine` (the default) know the training budget: after
`warmup_steps` of linear warm-up the rate falls from `lr` to `min_lr` when the budget (`max_steps`,
`max_epochs` or `max_minutes`, whichever comes first) is spent, as budgeted-training studies
recommend (Li et al. 2020, "Budgeted training: rethinking deep neural network training under
resource constraints"); `plateau` halves the rate when validation BLEU stops improving (torch's
ReduceLROnPlateau), for runs without a budget or with a stopping target.

A budget schedule is a pure function of the step and the elapsed training time, both part of the
training state, so a resumed run continues it where it was; data-parallel replicas read one clock
(the slowest rank's), so they take the same rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from nmt.config.schema import Schedule, TrainConfig

DECAYS: dict[Schedule, Callable[[float], float]] = {
    Schedule.linear: lambda progress: 1.0 - progress,
    Schedule.cosine: lambda progress: 0.5 * (1.0 + math.cos(math.pi * progress)),
}


class BudgetSchedule:
    """lr(step, seconds) = min_lr + (lr - min_lr) * warmup * decay(progress), progress in [0, 1]
    the spent fraction of the budget."""

    def __init__(self, kind: Schedule, lr: float, min_lr: float, warmup_steps: int, max_steps: int, max_seconds: float) -> None:
        if not (max_steps or max_seconds):
            raise ValueError("a budget schedule needs max_steps or max_seconds")
        self.decay, self.lr, self.min_lr = DECAYS[kind], lr, min(min_lr, lr)
        self.warmup_steps, self.max_steps, self.max_seconds = warmup_steps, max_steps, max_seconds

    def progress(self, step: int, seconds: float) -> float:
        spent = max(step / self.max_steps if self.max_steps else 0.0, seconds / self.max_seconds if self.max_seconds else 0.0)
        return min(1.0, spent)

    def rate(self, step: int, seconds: float) -> float:
        """The learning rate of the step after `step` steps and `seconds` of training."""
        warmup = min(1.0, (step + 1) / self.warmup_steps) if self.warmup_steps else 1.0
        return self.min_lr + (self.lr - self.min_lr) * warmup * self.decay(self.progress(step, seconds))

    def apply(self, optimizer: torch.optim.Optimizer, step: int, seconds: float) -> float:
        rate = self.rate(step, seconds)
        for group in optimizer.param_groups:
            group["lr"] = rate
        return rate


def budget_steps(tc: TrainConfig, steps_per_epoch: int) -> int:
    """The step budget a schedule decays over: max_steps, or max_epochs of `steps_per_epoch` (the
    first epoch's count; length bucketing changes it by a batch or two), whichever is smaller;
    0 when only max_minutes bounds the run."""
    budgets = [b for b in (tc.max_steps, tc.max_epochs * steps_per_epoch) if b]
    return min(budgets) if budgets else 0
