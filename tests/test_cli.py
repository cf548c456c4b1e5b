"""The command-line entry points, run as a user runs them."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import TINY_MODEL, Result, cli, compose_config, toy_overrides

from nmt.training.session import train


def run(args: list[str], timeout: int = 300) -> Result:
    return cli(args[0], args[1:], timeout=timeout)


def test_train_then_evaluate_from_the_command_line(workdir: Path) -> None:
    run_dir = workdir / "run"
    proc = run(["nmt.train", *toy_overrides(workdir, task="copy", n_train=300),
                "train.max_steps=12", "train.valid_every=6", f"hydra.run.dir={run_dir}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (run_dir / "checkpoints" / "best.pt").is_file() and (run_dir / "checkpoints" / "last.pt").is_file()
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    log = (run_dir / "train.log").read_text()
    assert "step 6 valid:" in log and "step 12 valid:" in log and "max_steps=12 reached" in log

    proc = run(["nmt.evaluate", f"ckpt={run_dir / 'checkpoints' / 'best.pt'}", "split=test"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "test: BLEU = " in proc.stdout and "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp" in proc.stdout
    assert (run_dir / "checkpoints" / "best.test.hyp").is_file()

    proc = run(["nmt.evaluate", f"runs_dir={workdir}", "split=valid"])  # newest run's best.pt
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"hypotheses: {run_dir / 'checkpoints' / 'best.valid.hyp'}" in proc.stdout


def test_evaluate_with_no_runs_says_what_to_do(workdir: Path) -> None:
    proc = run(["nmt.evaluate", f"runs_dir={workdir}"])
    assert proc.returncode == 2
    assert "no checkpoints/best.pt under" in proc.stderr and "Traceback" not in proc.stderr


def test_evaluate_with_a_missing_checkpoint_is_one_line(workdir: Path) -> None:
    proc = run(["nmt.evaluate", f"ckpt={workdir / 'missing.pt'}"])
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"error: ckpt={workdir / 'missing.pt'}: checkpoint not found"


def test_data_command_prepares_and_reports(workdir: Path) -> None:
    proc = run(["nmt.data", *toy_overrides(workdir, task="copy", n_train=100)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "train: 100 pairs" in proc.stdout and "train filter: 100 read, 0 empty, 0 too long, 100 kept" in proc.stdout

@pytest.mark.slow

def test_default_multi30k_pipeline_trains_a_few_steps(workdir: Path) -> None:
    """The default corpus and run end to end (one model, tiny, small vocabulary, 3 steps): no error, real BLEU."""
    cfg = compose_config([
        f"data.cache_dir={workdir / 'prepared'}", "data.vocab_size=1000", "train.max_steps=3", "train.test_at_end=false",
        "train.valid_every=3", "train.progress=false", "train.decode.max_len_extra=2", "train.decode.max_len_ratio=1.0", "train.threads=1",
        *TINY_MODEL,
    ])
    state = train(cfg, workdir / "run")
    assert cfg.train.ensemble_size == 1 and state.step == 3 and 0.0 <= state.best_bleu < 100.0
    assert (workdir / "run" / "checkpoints" / "best.pt").is_file()
