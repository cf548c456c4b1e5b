"""End to end on a toy task: the model really learns, evaluation scores it, TensorBoard holds it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from nmt.config.commands import EvalConfig
from nmt.decoding.scoring import evaluate_checkpoint


def test_toy_reverse_reaches_95_percent_exact_match_within_two_minutes(trained_toy: Path) -> None:
    seconds = float((trained_toy / "train_seconds.txt").read_text().split()[0])
    assert seconds < 120
    report = evaluate_checkpoint(EvalConfig(ckpt=str(trained_toy / "checkpoints" / "best.pt"), split="test"))
    assert report["exact_match"] >= 0.95, report
    assert report["sentences"] == 200
    written = json.loads((trained_toy / "checkpoints" / "best.test.json").read_text())
    assert written["bleu"] == report["bleu"] and "nrefs:1|case:mixed|eff:no|tok:13a" in written["bleu_signature"]
    hyps = (trained_toy / "checkpoints" / "best.test.hyp").read_text().splitlines()
    assert len(hyps) == 200


def test_checkpoints_and_tensorboard_scalars_are_written(trained_toy: Path) -> None:
    assert (trained_toy / "checkpoints" / "best.pt").is_file()
    assert (trained_toy / "checkpoints" / "last.pt").is_file()
    acc = EventAccumulator(str(trained_toy / "tensorboard"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train/loss", "train/ppl", "train/lr", "train/tokens_per_s", "valid/bleu", "valid/loss", "valid/exact_match"} <= tags
    losses = [e.value for e in acc.Scalars("train/loss")]
    assert losses[-1] < losses[0] / 2  # label smoothing 0.1 keeps the loss well above 0


def test_the_run_is_in_the_hparams_dashboard(trained_toy: Path) -> None:
    events = EventAccumulator(str(trained_toy / "tensorboard" / "hparams"))
    events.Reload()
    assert events.PluginTagToContent("hparams")  # the session's hyper-parameters and metric names
    scalars = set(events.Tags()["scalars"])
    assert {"valid/bleu", "test/bleu", "test/aer", "test/kendall_tau"} <= scalars
    written = json.loads((trained_toy / "metrics.json").read_text())["test"]
    assert events.Scalars("test/aer")[0].value == pytest.approx(written["aer"], rel=1e-6)
