"""Bad input, as a user meets it on the command line: one clear line naming the file, line or key,
a non-zero exit code, no traceback, nothing half-written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from support import CUSTOM, GOOD, assert_user_error, cli, compose_config, good_corpus, toy_overrides, train_cli, write_split

from nmt.system.errors import UserError
from nmt.training import step as step_module
from nmt.training.session import train


def assert_nothing_half_written(workdir: Path) -> None:
    assert not (workdir / "run" / "checkpoints").exists()
    assert not list(workdir.rglob("*.tmp"))


@pytest.mark.parametrize(("name", "src", "tgt", "message"), [
    ("line counts differ", b"a\nb\nc\n", b"a\nb\n", "train.xx has 3 lines but {dir}/train.yy has 2"),
    ("empty file", b"", b"", "{dir}/train.xx: file is empty"),
    ("invalid UTF-8", b"a b\nc \xff d\n", b"b a\nd c\n", "{dir}/train.xx:2: invalid UTF-8"),
])
def test_bad_training_files(workdir: Path, name: str, src: bytes, tgt: bytes, message: str) -> None:
    good_corpus(workdir / "corpus")
    write_split(workdir / "corpus", "train", src, tgt)
    assert_user_error(train_cli(workdir), message.format(dir=workdir / "corpus"))
    assert_nothing_half_written(workdir)


def test_missing_training_file(workdir: Path) -> None:
    good_corpus(workdir / "corpus")
    (workdir / "corpus" / "train.yy").unlink()
    assert_user_error(train_cli(workdir), f"{workdir / 'corpus' / 'train.yy'}: corpus file not found")
    assert_nothing_half_written(workdir)


def test_overlong_training_lines_are_dropped_and_counted(workdir: Path) -> None:
    good_corpus(workdir / "corpus")
    long = "a " * 12
    rows = GOOD + [(long, "a"), ("a", long), (long, long)]
    write_split(workdir / "corpus", "train", "".join(s + "\n" for s, _ in rows).encode(), "".join(t + "\n" for _, t in rows).encode())
    proc = train_cli(workdir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    log = (workdir / "run" / "train.log").read_text()
    assert "train: 33 pairs read, 0 dropped as empty, 3 dropped as longer than 8 tokens, 30 kept" in log


@pytest.mark.parametrize(("override", "message"), [
    ("train.max_stepz=3", "error: Could not override 'train.max_stepz': Key 'max_stepz' not in 'TrainConfig'"),
    ("model.attention.score=cosine", "error: Error merging override model.attention.score=cosine: Invalid value 'cosine', "
                                     "expected one of [dot, general, additive, location, scaled_dot]"),
    ("train.precision=fp8", "error: Error merging override train.precision=fp8: Invalid value 'fp8', expected one of [auto, fp32, bf16]"),
    ("train.lr=fast", "error: Error merging override train.lr=fast: Value 'fast' of type 'str' could not be converted to Float"),
    ("data=nope", "error: In 'config': Could not find 'data/nope': available: custom, multi30k_de_en, multi30k_en_de, multi30k_en_fr, "
                  "toy_copy, toy_grammar, toy_reverse"),
    ("train.lr=[", "error: cannot parse the override 'train.lr=[': no viable alternative at input '['"),
])
def test_unknown_config_key_or_value_is_one_line_and_exit_2(override: str, message: str) -> None:
    proc = cli("nmt.train", [override])  # Hydra finds it before anything runs; nmt.system.cli reports it
    assert proc.returncode == 2
    assert proc.stderr.strip() == message


@pytest.mark.parametrize(("content", "message"), [
    (None, "ckpt={ckpt}: checkpoint not found"),
    (b"definitely not a checkpoint", "{ckpt}: not a checkpoint: not the zip archive that nmt.train writes"),
])
def test_missing_or_corrupt_checkpoint(workdir: Path, content: bytes | None, message: str) -> None:
    ckpt = workdir / "model.pt"
    if content is not None:
        ckpt.write_bytes(content)
    for module in ("nmt.evaluate", "nmt.translate", "nmt.align"):
        assert_user_error(cli(module, [f"ckpt={ckpt}"]), message.format(ckpt=ckpt))

@pytest.mark.slow

def test_checkpoint_from_an_incompatible_config(workdir: Path) -> None:
    good_corpus(workdir / "corpus")
    assert train_cli(workdir).returncode == 0
    last = workdir / "run" / "checkpoints" / "last.pt"
    proc = train_cli(workdir, ["train.resume=auto", "model.decoder.hidden_size=48"])
    assert_user_error(proc, f"{last}: checkpoint comes from an incompatible config (model.decoder.hidden_size: checkpoint 64, now 48)")
    proc = cli("nmt.train", [*CUSTOM, f"data.dir={workdir / 'corpus'}", f"data.cache_dir={workdir / 'prepared'}",
                             f"hydra.run.dir={workdir / 'other'}", "model.decoder.hidden_size=48", f"train.init_from={last}"])
    assert_user_error(proc, f"train.init_from={last}: weights do not fit this model")
    assert not (workdir / "other" / "checkpoints").exists()


def test_non_finite_losses_are_skipped_then_stop_training(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = toy_overrides(workdir, task="copy", n_train=200) + ["train.valid_every=4", "train.test_at_end=false", "train.log_every=1"]
    real_batch_loss = step_module.batch_loss
    calls = {"n": 0, "poisoned": {2, 3}}

    def poisoned(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls["n"] += 1
        losses = real_batch_loss(*args, **kwargs)
        return losses._replace(ce=losses.ce * float("nan")) if calls["n"] in calls["poisoned"] else losses

    monkeypatch.setattr(step_module, "batch_loss", poisoned)
    state = train(compose_config(base + ["train.max_steps=8"]), workdir / "a")
    assert state.step == 8 and state.skipped_steps == 2
    weights = torch.load(workdir / "a" / "checkpoints" / "last.pt", weights_only=True)["model"]
    assert all(torch.isfinite(w).all() for w in weights.values())
    assert json.loads((workdir / "a" / "metrics.json").read_text())["skipped_steps"] == 2

    calls.update(n=0, poisoned=set(range(3, 100)))
    with pytest.raises(UserError, match=r"training diverged: 5 steps in a row with a non-finite loss or gradient \(up to step 7\)"):
        train(compose_config(base + ["train.max_steps=50", "train.max_nonfinite_steps=5"]), workdir / "b")
