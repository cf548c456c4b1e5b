"""train.early_stopping_patience: training stops after that many validations without a better value
of train.early_stopping_metric (the validation loss by default, or BLEU); 0 turns it off (the budget
alone ends the run). best.pt is the best validation BLEU whatever early stopping watches."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import compose_config, toy_overrides

from nmt.config.schema import Config, StopMetric
from nmt.training import loop
from nmt.training.session import train

# A rate of 0: the weights never change, so no validation after the first one is better.
FROZEN = ["train.lr=0", "train.min_lr=0", "train.valid_every=5", "train.max_steps=30", "train.test_at_end=false",
          "train.select_at_end=false", "train.keep_checkpoints=0", "log.attention_examples=0"]


@pytest.mark.parametrize(("patience", "metric", "steps"), [(2, "loss", 15), (2, "bleu", 15), (0, "loss", 30)])
def test_patience_counts_validations_without_a_better_value(tmp_path: Path, patience: int, metric: str, steps: int) -> None:
    cfg = compose_config(toy_overrides(tmp_path, task="copy", n_train=300) + FROZEN
                         + [f"train.early_stopping_patience={patience}", f"train.early_stopping_metric={metric}"])
    state = train(cfg, tmp_path / "run")
    assert state.step == steps
    if patience:
        assert state.stop == f"early stopping: no better validation {metric} in 2 validations"
    else:
        assert "max_steps" in state.stop


# Scripted validations: the loss keeps falling while BLEU peaks at the second validation.
LOSSES = [3.0, 2.9, 2.8, 2.7, 2.6, 2.5]
BLEUS = [10.0, 12.0, 11.0, 11.5, 11.9, 11.0]


@pytest.mark.parametrize(("metric", "steps"), [("loss", 30), ("bleu", 20)])
def test_each_metric_stops_on_its_own_curve_and_best_pt_stays_the_best_bleu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metric: str, steps: int
) -> None:
    scripted = iter(range(len(LOSSES)))

    def validate(*args: object) -> dict[str, float]:
        k = next(scripted)
        return {"loss": LOSSES[k], "ppl": 1.0, "bleu": BLEUS[k], "chrf": 0.0, "exact_match": 0.0}

    monkeypatch.setattr(loop, "validate", validate)
    cfg = compose_config(toy_overrides(tmp_path, task="copy", n_train=300) + FROZEN
                         + ["train.early_stopping_patience=2", f"train.early_stopping_metric={metric}"])
    state = train(cfg, tmp_path / "run")
    assert state.step == steps  # bleu: no better BLEU at steps 15 and 20; loss: better every time, the budget ends it
    assert state.best["step"] == 10 and state.best_bleu == 12.0


def test_early_stopping_watches_the_validation_loss_by_default() -> None:
    assert Config().train.early_stopping_patience == 6
    assert Config().train.early_stopping_metric is StopMetric.loss


def test_an_unknown_metric_is_refused(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="early_stopping_metric"):
        compose_config(toy_overrides(tmp_path, task="copy", n_train=300) + ["train.early_stopping_metric=chrf"])
