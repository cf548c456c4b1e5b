"""Resume: a run killed with SIGKILL and resumed equals one that never stopped; init_from."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from support import ROOT, compose_config, toy_overrides
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from nmt.model.checkpoint import load_checkpoint
from nmt.system.errors import UserError
from nmt.training.resume import check_compatible
from nmt.training.session import train

STEPS = 60
RUN = ["train.max_steps=60", "train.valid_every=10", "train.log_every=1", "train.test_at_end=false",
       "train.early_stopping_patience=100", "log.attention_examples=1"]


def train_cmd(workdir: Path, run_dir: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "nmt.train", *toy_overrides(workdir, task="reverse", n_train=600), *RUN,
            f"hydra.run.dir={run_dir}", *extra]


def step_losses(run_dir: Path) -> dict[int, float]:
    """train/loss per step as TensorBoard shows it (orphaned events of a killed run purged)."""
    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    return {e.step: e.value for e in acc.Scalars("train/loss")}


@pytest.mark.slow
def test_sigkill_then_resume_matches_an_uninterrupted_run(workdir: Path) -> None:
    whole = workdir / "whole"
    proc = subprocess.run(train_cmd(workdir, whole, []), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]

    cut = workdir / "cut"
    last = cut / "checkpoints" / "last.pt"
    killed = subprocess.Popen(train_cmd(workdir, cut, []), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not last.exists() and time.monotonic() < deadline and killed.poll() is None:
        time.sleep(0.005)
    time.sleep(0.05)  # a few steps past the checkpoint: those must be redone identically
    assert killed.poll() is None, "the run finished before it could be killed"
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    saved = load_checkpoint(last)
    assert 10 <= saved.step < STEPS and saved.rng and saved.train_state

    proc = subprocess.run(train_cmd(workdir, cut, ["train.resume=auto"]), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"resumed {last} at step {saved.step}" in (cut / "train.log").read_text()

    reference, resumed = step_losses(whole), step_losses(cut)
    assert sorted(resumed) == list(range(1, STEPS + 1)) == sorted(reference)
    for step in range(1, STEPS + 1):
        assert abs(resumed[step] - reference[step]) < 1e-5, (step, resumed[step], reference[step])
    assert load_checkpoint(cut / "checkpoints" / "last.pt").step == STEPS
    best_cut, best_whole = load_checkpoint(cut / "checkpoints" / "best.pt"), load_checkpoint(whole / "checkpoints" / "best.pt")
    assert best_cut.step == best_whole.step and best_cut.best_bleu == best_whole.best_bleu
    for name, tensor in best_whole.model.items():
        torch.testing.assert_close(best_cut.model[name], tensor, rtol=1e-5, atol=1e-6)

@pytest.mark.slow

def test_resume_auto_without_a_checkpoint_starts_afresh_and_a_missing_path_is_an_error(workdir: Path) -> None:
    cfg = compose_config(toy_overrides(workdir, task="copy", n_train=200) + ["train.max_steps=2", "train.valid_every=2",
                                                                          "train.test_at_end=false", "train.resume=auto"])
    assert train(cfg, workdir / "fresh").step == 2
    proc = subprocess.run(train_cmd(workdir, workdir / "other", [f"train.resume={workdir / 'nowhere'}"]),
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == f"error: train.resume={workdir / 'nowhere'}: no checkpoint at {workdir / 'nowhere'}"


def test_resume_of_a_finished_run_with_a_larger_budget_continues_its_step_count(workdir: Path) -> None:
    base = toy_overrides(workdir, task="copy", n_train=200) + ["train.valid_every=3", "train.test_at_end=false"]
    run_dir = workdir / "run"
    train(compose_config(base + ["train.max_steps=3"]), run_dir)
    state = train(compose_config(base + ["train.max_steps=6", "train.resume=auto"]), run_dir)
    assert state.step == 6
    assert load_checkpoint(run_dir / "checkpoints" / "last.pt").step == 6


def test_init_from_copies_weights_into_a_new_run(workdir: Path) -> None:
    base = toy_overrides(workdir, task="copy", n_train=200) + ["train.valid_every=3", "train.test_at_end=false", "train.max_steps=3"]
    train(compose_config(base), workdir / "a")
    source = workdir / "a" / "checkpoints" / "last.pt"
    state = train(compose_config(base + [f"train.init_from={source}", "train.lr=0"]), workdir / "b")
    assert state.step == 3  # a new run: counts from 0
    before, after = load_checkpoint(source).model, load_checkpoint(workdir / "b" / "checkpoints" / "last.pt").model
    for name, tensor in before.items():  # lr 0: the weights are exactly the ones copied in
        assert torch.equal(after[name], tensor), name


def test_resume_accepts_another_init_range_but_not_another_model(tmp_path: Path) -> None:
    """model.init_range only draws the starting weights, which resuming replaces: a checkpoint
    trained with another range continues; a model setting that changes the weights' shapes does not."""
    cfg = compose_config([])
    saved = OmegaConf.to_container(OmegaConf.structured(compose_config(["model.init_range=0"])), resolve=True, enum_to_str=True)
    assert isinstance(saved, dict)
    check_compatible(saved, cfg, tmp_path / "last.pt")
    saved["model"]["decoder"]["hidden_size"] = 64
    refusal = r"last.pt: checkpoint comes from an incompatible config \(model.decoder.hidden_size: checkpoint 64, now 512\)$"
    with pytest.raises(UserError, match=refusal):
        check_compatible(saved, cfg, tmp_path / "last.pt")
