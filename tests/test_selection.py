"""train.select_at_end: best.pt becomes the candidate that translates the validation split best
the way the model will be used (beam search), and metrics.json says which it was."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from support import compose_config, toy_overrides

from nmt.config.commands import EvalConfig
from nmt.config.schema import Config, DecodeConfig
from nmt.decoding.scoring import evaluate_checkpoint
from nmt.model.checkpoint import load_checkpoint
from nmt.system.runtime import cpu_decodes_faster_in_bf16
from nmt.training.selection import select_best
from nmt.training.session import train

RUN = ["train.valid_every=10", "train.test_at_end=false", "train.early_stopping_patience=100", "train.keep_checkpoints=2",
       "train.select_decode.beam_size=3", "log.attention_examples=0",
       "train.warmup_steps=10"]  # the warm-up this test was set up with (the default is none since model.init_range=0.1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Config, Path, Path]:
    """(config, a 60-step toy run that selected its best.pt, a 5-step run of the same config)."""
    workdir = tmp_path_factory.mktemp("selection")
    base = toy_overrides(workdir, task="copy", n_train=600) + RUN
    cfg = compose_config(base + ["train.max_steps=60", "train.select_at_end=true"])
    train(cfg, workdir / "run")
    train(compose_config(base + ["train.max_steps=5", "train.select_at_end=false"]), workdir / "early")
    return cfg, workdir / "run", workdir / "early"


def valid_bleu(ckpt: Path, beam: int) -> float:
    return float(evaluate_checkpoint(EvalConfig(ckpt=str(ckpt), split="valid", decode=DecodeConfig(beam_size=beam)))["bleu"])


def test_best_pt_is_the_candidate_with_the_best_beam_validation_and_metrics_say_which(runs: tuple[Config, Path, Path]) -> None:
    _, run, early = runs
    selection = json.loads((run / "metrics.json").read_text())["selection"]
    assert selection["decoding"] == f"beam 3, alpha 0.6, {'bf16' if cpu_decodes_faster_in_bf16() else 'fp32'}"
    candidates = selection["candidates"]
    assert {"best.pt", "average.pt"} <= set(candidates)
    chosen = selection["chosen"]
    assert candidates[chosen]["bleu"] == max(c["bleu"] for c in candidates.values())
    # measured again, independently: best.pt now translates exactly as the chosen candidate did
    assert valid_bleu(run / "checkpoints" / "best.pt", 3) == candidates[chosen]["bleu"]
    assert "selection" not in json.loads((early / "metrics.json").read_text())  # switched off
    assert Config().train.select_at_end and Config().train.keep_checkpoints >= 2  # on by default, with an average


def test_a_best_pt_of_weaker_weights_is_replaced_by_the_last_ones(runs: tuple[Config, Path, Path], workdir: Path) -> None:
    cfg, run, early = runs
    folder = workdir / "checkpoints"
    shutil.copytree(run / "checkpoints", folder)
    shutil.copy(early / "checkpoints" / "last.pt", folder / "best.pt")  # a best.pt of step 5
    selection = select_best(cfg, folder)
    assert selection["candidates"]["best.pt"]["step"] == 5
    assert selection["chosen"] in ("last.pt", "average.pt")
    assert selection["candidates"]["best.pt"]["bleu"] < selection["candidates"][selection["chosen"]]["bleu"]
    best, chosen = load_checkpoint(folder / "best.pt"), load_checkpoint(folder / selection["chosen"])
    assert all(torch.equal(best.model[name], tensor) for name, tensor in chosen.model.items())
    assert not list(folder.glob("best.*.hyp"))  # the old best.pt's hypotheses do not outlive it
