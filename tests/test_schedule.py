"""Learning-rate schedules that know the budget: warm-up, then down to min_lr exactly when the budget is spent."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from support import compose_config, toy_overrides
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from nmt.config.checks import check_settings
from nmt.config.schema import Schedule
from nmt.system.errors import UserError
from nmt.training.schedule import BudgetSchedule, budget_steps
from nmt.training.session import train


def test_linear_and_cosine_reach_min_lr_at_the_end_of_the_budget() -> None:
    linear = BudgetSchedule(Schedule.linear, 1e-3, 1e-5, 0, 100, 0)
    assert linear.rate(0, 0) == pytest.approx(1e-3)
    assert linear.rate(50, 0) == pytest.approx(1e-5 + (1e-3 - 1e-5) / 2)
    assert linear.rate(100, 0) == pytest.approx(1e-5) and linear.rate(150, 0) == pytest.approx(1e-5)
    cosine = BudgetSchedule(Schedule.cosine, 1e-3, 0.0, 0, 100, 0)
    assert cosine.rate(50, 0) == pytest.approx(5e-4) and cosine.rate(25, 0) == pytest.approx(1e-3 * (1 + math.cos(math.pi / 4)) / 2)


def test_warm_up_then_decay_and_the_time_budget_counts_too() -> None:
    schedule = BudgetSchedule(Schedule.linear, 1e-3, 0.0, 10, 0, 600.0)
    assert schedule.rate(0, 0.0) == pytest.approx(1e-4) and schedule.rate(4, 0.0) == pytest.approx(5e-4)
    assert schedule.rate(100, 300.0) == pytest.approx(5e-4)  # half the 10 minutes spent
    both = BudgetSchedule(Schedule.linear, 1e-3, 0.0, 0, 1000, 600.0)
    assert both.rate(100, 540.0) == pytest.approx(1e-4)  # whichever budget is nearer its end


def test_a_budget_schedule_needs_a_budget(workdir: Path) -> None:
    cfg = compose_config(toy_overrides(workdir) + ["train.schedule=cosine", "train.max_minutes=0", "train.max_steps=0"])
    with pytest.raises(UserError, match="train.schedule=cosine decays over the budget: set train.max_steps, train.max_epochs or"):
        check_settings(cfg)
    check_settings(compose_config(toy_overrides(workdir) + ["train.max_minutes=0", "train.max_epochs=3"]))  # epochs are a budget too
    check_settings(compose_config(toy_overrides(workdir) + ["train.max_minutes=0", "train.schedule=plateau"]))  # plateau needs none


def test_the_step_budget_is_the_nearest_of_max_steps_and_max_epochs(workdir: Path) -> None:
    budget = lambda *overrides: budget_steps(compose_config(toy_overrides(workdir) + list(overrides)).train, 40)  # noqa: E731
    assert budget("train.max_steps=0", "train.max_epochs=0") == 0  # max_minutes alone: the schedule follows the clock
    assert budget("train.max_steps=0", "train.max_epochs=3") == 120
    assert budget("train.max_steps=100", "train.max_epochs=3") == 100
    assert budget("train.max_steps=500", "train.max_epochs=3") == 120


def test_training_for_epochs_decays_to_min_lr_at_the_last_epoch(workdir: Path) -> None:
    cfg = compose_config(toy_overrides(workdir, task="copy", n_train=300) + [
        "train.schedule=linear", "train.warmup_steps=0", "train.max_epochs=2", "train.max_minutes=0", "train.log_every=1",
        "train.valid_every=1000", "train.test_at_end=false", "train.min_lr=0"])
    train(cfg, workdir / "run")
    events = EventAccumulator(str(workdir / "run" / "tensorboard"))
    events.Reload()
    rates = [e.value for e in events.Scalars("train/lr")]
    # the first epoch's batch count sets the budget: the last step of a same-sized second epoch is 1/n before its end
    assert rates[0] == pytest.approx(cfg.train.lr) and 0 <= rates[-1] <= cfg.train.lr * 2 / len(rates)


def test_training_follows_the_schedule(workdir: Path) -> None:
    cfg = compose_config(toy_overrides(workdir, task="copy", n_train=300) + [
        "train.schedule=linear", "train.warmup_steps=4", "train.max_steps=20", "train.max_minutes=0", "train.log_every=1",
        "train.valid_every=20", "train.test_at_end=false", "train.lr=0.002", "train.min_lr=0.0001"])
    train(cfg, workdir / "run")
    events = EventAccumulator(str(workdir / "run" / "tensorboard"))
    events.Reload()
    rates = [e.value for e in events.Scalars("train/lr")]
    assert rates[0] == pytest.approx(0.002 * 1 / 4 * (1 - 0 / 20) + 0.0001 * (1 - 1 / 4), rel=1e-5)  # step 1: warm-up 1/4
    assert rates[3] == pytest.approx(0.0001 + 0.0019 * (1 - 3 / 20), rel=1e-5)  # step 4: warmed up
    assert rates[-1] == pytest.approx(0.0001 + 0.0019 * (1 - 19 / 20), rel=1e-5)  # step 20, just before the end
