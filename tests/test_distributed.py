"""Data-parallel training under torchrun on CPU (gloo): replicas stay identical, rank 0 alone writes."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from support import ROOT, toy_overrides

from nmt.model.checkpoint import load_checkpoint


@pytest.mark.slow
def test_torchrun_two_processes_keep_identical_replicas_and_write_one_run(workdir: Path) -> None:
    run_dir = workdir / "run"
    scratch_before = set(Path(tempfile.gettempdir()).glob("nmt-rank*"))
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "nmt.train",
         *toy_overrides(workdir, task="copy", n_train=400), "train.max_steps=6", "train.valid_every=3",
         "train.test_at_end=false", f"hydra.run.dir={run_dir}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["steps"] == 6
    replicas = metrics["processes"]
    assert replicas["count"] == 2 and replicas["replicas_identical"]
    assert len(set(replicas["parameter_sha1"])) == 1
    # One set of outputs: one event file, one log, one run's checkpoints (best, last, the two kept
    # validations' and their average, train.select_at_end); no stray rank folders left.
    assert len(list((run_dir / "tensorboard").glob("events.out.tfevents.*"))) == 1
    kept = ["average.pt", "best.pt", "last.pt", "step-0000003.pt", "step-0000006.pt"]
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("*.pt")) == kept
    log = (run_dir / "train.log").read_text()
    assert "2 process(es)" in log and log.count("step 3 valid:") == 1
    assert len(load_checkpoint(run_dir / "checkpoints" / "last.pt").rng or []) == 2  # each rank's generators
    assert set(Path(tempfile.gettempdir()).glob("nmt-rank*")) == scratch_before


@pytest.mark.slow
def test_torchrun_replicas_read_one_clock_for_a_wall_clock_schedule(workdir: Path) -> None:
    # With only max_minutes as the budget the rate of every step comes from the elapsed time; each
    # rank's own clock would give each replica a slightly different rate (and different weights).
    run_dir = workdir / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "nmt.train",
         *toy_overrides(workdir, task="copy", n_train=400), "train.schedule=cosine", "train.warmup_steps=2", "train.max_steps=0",
         "train.max_minutes=0.1", "train.valid_every=1000", "train.test_at_end=false", f"hydra.run.dir={run_dir}"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["steps"] > 3 and metrics["stop"].startswith("max_minutes")
    assert metrics["processes"]["replicas_identical"]
