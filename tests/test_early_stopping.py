"""train.early_stopping_patience: training stops after that many validations without a better
validation BLEU; 0 turns it off (the budget alone ends the run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import compose_config, toy_overrides

from nmt.config.schema import Config
from nmt.training.session import train

# A rate of 0: the weights never change, so no validation after the first one is better.
FROZEN = ["train.lr=0", "train.min_lr=0", "train.valid_every=5", "train.max_steps=30", "train.test_at_end=false",
          "train.select_at_end=false", "train.keep_checkpoints=0", "log.attention_examples=0"]


@pytest.mark.parametrize(("patience", "steps"), [(2, 15), (0, 30)])
def test_patience_counts_validations_without_a_better_bleu(tmp_path: Path, patience: int, steps: int) -> None:
    cfg = compose_config(toy_overrides(tmp_path, task="copy", n_train=300) + FROZEN + [f"train.early_stopping_patience={patience}"])
    state = train(cfg, tmp_path / "run")
    assert state.step == steps
    if patience:
        assert state.stop == "early stopping: no better validation BLEU in 2 validations"
    else:
        assert "max_steps" in state.stop


def test_early_stopping_is_on_by_default() -> None:
    assert Config().train.early_stopping_patience == 6
