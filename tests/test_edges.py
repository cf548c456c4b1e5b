"""The edges where a user used to lose a result or an hour: runs that hung, clobbered each other or
failed late, outputs that could be left half-written, checkpoints that gave tracebacks."""

from __future__ import annotations

import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from support import ROOT, TINY_MODEL, assert_user_error, cli, compose_config, good_corpus, toy_overrides, train_cli, write_split

from nmt.config.commands import EvalConfig
from nmt.config.schema import DecodeConfig
from nmt.decoding.scoring import evaluate_checkpoint
from nmt.system.files import file_lock

# --- the trainer never hangs ------------------------------------------------------------------


def test_a_corpus_filtered_to_nothing_stops_at_once_with_the_counts(workdir: Path) -> None:
    good_corpus(workdir / "corpus")
    write_split(workdir / "corpus", "train", b"a b\nb c a\n\n", b"b a\na c b\n\n")
    start = time.monotonic()
    proc = train_cli(workdir, ["data.max_len=2", "train.max_steps=0"], timeout=120)  # every pair is longer (or empty)
    assert_user_error(proc, f"no training pair left: 3 pairs read from {workdir / 'corpus' / 'train.xx'}, "
                            f"{workdir / 'corpus' / 'train.yy'}, 1 dropped as empty, 2 dropped as longer than data.max_len=2 tokens")
    assert time.monotonic() - start < 60
    assert not (workdir / "run" / "checkpoints").exists()


def test_every_target_empty_stops_at_once(workdir: Path) -> None:
    good_corpus(workdir / "corpus")
    write_split(workdir / "corpus", "train", b"a b\nb c\n", b"\n \n")
    proc = train_cli(workdir, timeout=120)
    assert_user_error(proc, "no training pair has text on both sides (2 lines, all blank on one side)")


def test_blank_only_training_files_are_one_line(workdir: Path) -> None:
    good_corpus(workdir / "corpus")
    write_split(workdir / "corpus", "train", b"\n  \n\t\n", b"\n\n\n")
    assert_user_error(train_cli(workdir, timeout=120), f"{workdir / 'corpus' / 'train.xx'}, {workdir / 'corpus' / 'train.yy'}: "
                                                       "no training pair has text on both sides")


# --- found before any training ----------------------------------------------------------------


@pytest.mark.parametrize(("split", "damage", "message"), [
    ("valid", "missing", "valid.yy: corpus file not found"),
    ("test", "missing", "test.xx: corpus file not found"),
    ("valid", "utf8", "valid.xx:2: invalid UTF-8"),
])
def test_bad_valid_or_test_files_are_found_before_the_first_step(workdir: Path, split: str, damage: str, message: str) -> None:
    good_corpus(workdir / "corpus")
    if damage == "missing":
        (workdir / "corpus" / f"{split}.{'yy' if split == 'valid' else 'xx'}").unlink()
    else:
        write_split(workdir / "corpus", split, b"a b\nc \xff\n", b"b a\nc\n")
    proc = train_cli(workdir, ["train.max_steps=50", "train.valid_every=50"])
    assert_user_error(proc, message)
    assert not (workdir / "run" / "tensorboard").exists() and not (workdir / "run" / "checkpoints").exists()
    assert "model:" not in (workdir / "run" / "train.log").read_text()  # stopped before the model was built
    assert (workdir / "run" / "train.log").read_text().strip().splitlines()[-1].endswith(proc.stderr.strip())


@pytest.mark.parametrize(("override", "message"), [
    ("train.max_steps=-1", "train.max_steps=-1: must be >= 0"),
    ("data.batch_tokens=0", "data.batch_tokens=0: must be >= 1"),
    ("train.valid_every=0", "train.valid_every=0: must be >= 1"),
    ("train.lr=-1", "train.lr=-1.0: must be >= 0"),
    ("model.encoder.dropout=1.5", "model.encoder.dropout=1.5: must be in [0, 1)"),
    ("train.label_smoothing=1", "train.label_smoothing=1.0: must be in [0, 1)"),
    ("model.attention.gumbel_temperature=0", "model.attention.gumbel_temperature=0.0: must be > 0"),
    ("train.device=gpu0", "train.device=gpu0: not a device; expected auto, cpu, cuda or cuda:N"),
    ("train.init_from=/nowhere/best.pt", "train.init_from=/nowhere/best.pt: checkpoint not found"),
])
def test_out_of_range_settings_are_one_line_with_the_range(workdir: Path, override: str, message: str) -> None:
    proc = cli("nmt.train", [*toy_overrides(workdir), override, f"hydra.run.dir={workdir / 'run'}"], timeout=120)
    assert_user_error(proc, message)
    assert not (workdir / "prepared").exists()  # found before the data was touched


# --- the trainer never clobbers ---------------------------------------------------------------

LONG_TOY = ["train.max_steps=100000", "train.valid_every=100000", "train.test_at_end=false"]


def start_training(workdir: Path, extra: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "nmt.train", *toy_overrides(workdir, task="copy", n_train=300), *extra,
                             f"hydra.run.dir={workdir / 'run'}"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_for(condition, timeout: float = 120) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)

@pytest.mark.slow

def test_a_second_training_in_the_same_run_directory_is_refused(workdir: Path) -> None:
    first = start_training(workdir, LONG_TOY)
    try:
        log = workdir / "run" / "train.log"
        wait_for(lambda: log.exists() and "model:" in log.read_text())
        config_before = (workdir / "run" / ".hydra" / "config.yaml").read_text()
        second = cli("nmt.train", [*toy_overrides(workdir, task="copy", n_train=300), "train.lr=0.5",
                                   f"hydra.run.dir={workdir / 'run'}"], timeout=120)
        assert_user_error(second, f"{workdir / 'run'}: another training (process {first.pid} on ")
        assert "is running in this run directory; wait for it to end, or choose another hydra.run.dir" in second.stderr
        assert (workdir / "run" / ".hydra" / "config.yaml").read_text() == config_before  # not rewritten
        assert "error" not in log.read_text()  # the refusal is not written into the other run's log
        assert len(list((workdir / "run" / "tensorboard").glob("events.out.tfevents.*"))) == 1
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    # The killed run's lock does not block its resumption, and what it left half-written is cleared.
    orphan = workdir / "run" / "checkpoints" / ".last.pt.abc123.tmp"
    orphan.parent.mkdir(exist_ok=True)
    orphan.write_bytes(b"half a checkpoint")
    proc = cli("nmt.train", [*toy_overrides(workdir, task="copy", n_train=300), "train.max_steps=4", "train.valid_every=2",
                             "train.test_at_end=false", "train.resume=auto", f"hydra.run.dir={workdir / 'run'}"], timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not orphan.exists()
    assert f"removed {orphan}" in (workdir / "run" / "train.log").read_text()

@pytest.mark.slow

def test_two_processes_preparing_one_cache_both_succeed(workdir: Path) -> None:
    args = [sys.executable, "-m", "nmt.data", *toy_overrides(workdir, task="copy", n_train=3000)]
    procs = [subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-2000:]
    pattern = re.compile(r"^(\w+: \d+ pairs|vocabulary: .*|prepared in .*)$")
    reports = [[line for line in out.splitlines() if pattern.match(line)] for out, _ in outs]
    assert reports[0] == reports[1] and "train: 3000 pairs" in reports[0] and len(reports[0]) == 5
    folder = Path(outs[0][0].strip().splitlines()[-1].removeprefix("prepared in "))
    assert not list(folder.glob(".*.tmp"))


@pytest.mark.slow
def test_preparation_waits_for_the_process_holding_the_cache(workdir: Path) -> None:
    overrides = toy_overrides(workdir, task="copy", n_train=100)
    first = cli("nmt.data", overrides)
    assert first.returncode == 0, first.stderr[-2000:]
    folder = Path(first.stdout.strip().splitlines()[-1].removeprefix("prepared in "))
    for cached in ("src.model", "tgt.model", "train", "valid", "test"):  # force a new preparation in the same folder
        target = folder / cached
        subprocess.run(["rm", "-rf", str(target)], check=True)
    with file_lock(folder / ".lock", wait=False, note="the test"):
        waiting = subprocess.Popen([sys.executable, "-m", "nmt.data", *overrides], cwd=ROOT, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        time.sleep(8)
        assert waiting.poll() is None  # it waits for the lock holder
    out, err = waiting.communicate(timeout=300)
    assert waiting.returncode == 0, err[-2000:]
    assert "waiting for the test, which is preparing" in out and "train: 100 pairs" in out


# --- outputs are never half-written ---------------------------------------------------------


def test_evaluation_outputs_are_atomic_when_the_disk_fills(trained_toy: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "best.pt"
    ckpt.write_bytes((trained_toy / "checkpoints" / "best.pt").read_bytes())
    cfg = EvalConfig(ckpt=str(ckpt), split="test", decode=DecodeConfig(beam_size=1))
    evaluate_checkpoint(cfg)  # a complete first evaluation (and a warm cache)
    hyp, report = tmp_path / "best.test.hyp", tmp_path / "best.test.json"
    before = hyp.read_bytes(), report.read_bytes()
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100, hard))  # a write past 100 bytes fails: a full disk
    try:
        with pytest.raises(OSError):
            evaluate_checkpoint(cfg)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert (hyp.read_bytes(), report.read_bytes()) == before  # the previous results, whole
    assert not list(tmp_path.glob(".*.tmp"))


# --- checkpoints that load but are broken inside ----------------------------------------------


@pytest.mark.parametrize(("damage", "message"), [
    ("config_not_a_mapping", "checkpoint's 'config' is a str, expected a dict"),
    ("config_bad_value", "the checkpoint's config does not fit the current schema"),
    ("bad_sentencepiece", "the checkpoint's subword models are not valid sentencepiece models"),
    ("not_a_dict", "not a checkpoint of nmt.train (it holds a list, not a mapping)"),
    ("missing_model", "checkpoint lacks 'model'"),
])
def test_loadable_but_broken_checkpoints_are_one_line(trained_toy: Path, tmp_path: Path, damage: str, message: str) -> None:
    payload = torch.load(trained_toy / "checkpoints" / "best.pt", weights_only=True)
    if damage == "config_not_a_mapping":
        payload["config"] = "model: big"
    elif damage == "config_bad_value":
        payload["config"]["model"]["attention"]["score"] = "cosine"
    elif damage == "bad_sentencepiece":
        payload["src_spm"] = torch.zeros(10, dtype=torch.uint8)
    elif damage == "missing_model":
        del payload["model"]
    ckpt = tmp_path / "broken.pt"
    torch.save([payload] if damage == "not_a_dict" else payload, ckpt)
    (tmp_path / "in.txt").write_text("w1 w2\n")
    for module, args in (("nmt.evaluate", []), ("nmt.translate", [f"input={tmp_path / 'in.txt'}"]), ("nmt.align", [])):
        assert_user_error(cli(module, [f"ckpt={ckpt}", *args]), f"{ckpt}: {message}")


# --- translate: one line out per line in ------------------------------------------------------


def test_a_lone_carriage_return_does_not_split_a_line(trained_toy: Path, tmp_path: Path) -> None:
    ckpt = trained_toy / "checkpoints" / "best.pt"
    lines = [f"w{k} w{k + 1}" for k in range(12)]
    lines[4] = "w4 \r w5"  # a stray CR inside a line
    data = ("\n".join(lines[:-1]) + "\n" + lines[-1] + "\r\n").encode()  # the last line ends in CRLF
    (tmp_path / "in.txt").write_bytes(data)
    from_file = cli("nmt.translate", [f"ckpt={ckpt}", f"input={tmp_path / 'in.txt'}", "decode.beam_size=1"])
    from_stdin = subprocess.run([sys.executable, "-m", "nmt.translate", f"ckpt={ckpt}", "decode.beam_size=1"], cwd=ROOT,
                                input=data, capture_output=True, timeout=300)
    assert from_file.returncode == 0 and from_stdin.returncode == 0, from_file.stderr[-2000:]
    assert len(from_file.stdout.split("\n")) == 13 and from_file.stdout.endswith("\n")
    assert from_stdin.stdout.decode() == from_file.stdout
    assert from_file.stdout.split("\n")[0] == "w1 w0"


def test_invalid_utf8_input_names_the_line_and_leaves_no_output(trained_toy: Path, tmp_path: Path) -> None:
    ckpt = trained_toy / "checkpoints" / "best.pt"
    (tmp_path / "in.txt").write_bytes(b"w1 w2\nw3 \xff w4\nw5\n")
    proc = cli("nmt.translate", [f"ckpt={ckpt}", f"input={tmp_path / 'in.txt'}", f"output={tmp_path / 'out.txt'}"])
    assert_user_error(proc, f"{tmp_path / 'in.txt'}:2: invalid UTF-8")
    assert not (tmp_path / "out.txt").exists() and not list(tmp_path.glob(".*.tmp"))
    proc = subprocess.run([sys.executable, "-m", "nmt.translate", f"ckpt={ckpt}"], cwd=ROOT, input=b"w1\n\xfe\n",
                          capture_output=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.decode().strip().startswith("error: stdin:2: invalid UTF-8")


# --- the location score on sources longer than it was trained for -----------------------------

@pytest.mark.slow

def test_location_model_evaluates_and_aligns_sources_over_its_limit(workdir: Path) -> None:
    run = workdir / "run"
    overrides = toy_overrides(workdir, task="copy", n_train=300) + [
        "model.attention.score=location", "model.attention.max_source_len=16", "data.max_len=16", "data.toy.max_len=20",
        "train.max_steps=4", "train.valid_every=4", "train.test_at_end=false", f"hydra.run.dir={run}"]
    proc = cli("nmt.train", overrides)
    assert proc.returncode == 0, proc.stderr[-2000:]
    ckpt = run / "checkpoints" / "best.pt"
    evaluation = cli("nmt.evaluate", [f"ckpt={ckpt}", "split=test", "decode.beam_size=2"])
    assert evaluation.returncode == 0, evaluation.stderr[-2000:]
    assert "source sentences longer than the model's limit of 16 tokens were truncated" in evaluation.stdout + evaluation.stderr
    align = cli("nmt.align", [f"ckpt={ckpt}", "split=test", f"align.out={workdir / 'align'}"])
    assert align.returncode == 0, align.stderr[-2000:]
    assert "AER" in align.stdout
    long_line = " ".join(f"w{k % 10}" for k in range(30))
    translate = cli("nmt.translate", [f"ckpt={ckpt}"], input=long_line + "\n")
    assert translate.returncode == 0 and "truncated to 16" in translate.stderr


# --- a quiet terminal, and a log that ends with the error ----------------------------------------


def test_the_terminal_stays_quiet_and_a_failed_run_log_ends_with_its_error(workdir: Path) -> None:
    proc = cli("nmt.train", [*toy_overrides(workdir, task="copy", n_train=200), "train.max_steps=2", "train.valid_every=2",
                             "train.test_at_end=false", f"hydra.run.dir={workdir / 'quiet'}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr == ""  # no datasets progress bars ("Generating train split", "Map", "Saving the dataset")
    good_corpus(workdir / "corpus")
    (workdir / "corpus" / "test.yy").unlink()
    failed = train_cli(workdir)
    assert_user_error(failed, "test.yy: corpus file not found")
    assert (workdir / "run" / "train.log").read_text().strip().splitlines()[-1].endswith(failed.stderr.strip())


def test_bf16_autocast_computes_local_p_positions_in_float32() -> None:
    from nmt.attention.memory import AttentionMemory
    from nmt.attention.modes import LocalNormaliser

    torch.manual_seed(0)
    local = LocalNormaliser(window=4, predictive=True, query_size=64, hidden_size=32)
    query, scores = torch.randn(8, 64), torch.randn(8, 60)
    memory = AttentionMemory(torch.zeros(8, 60, 1), torch.zeros(8, 60, 1), torch.ones(8, 60, dtype=torch.bool))
    exact = local.position(memory, query, 0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cast = local.position(memory, query, 0)
        weights = local(scores, memory, query, 0)
    assert cast.dtype == torch.float32
    torch.testing.assert_close(cast, exact, rtol=0, atol=1e-5)
    torch.testing.assert_close(weights.float(), local(scores, memory, query, 0), rtol=0, atol=1e-5)


def test_compose_config_helper_still_rejects_out_of_range_values(workdir: Path) -> None:
    from nmt.config.checks import check_settings
    from nmt.system.errors import UserError

    cfg = compose_config([*TINY_MODEL, "train.max_steps=-3"])
    with pytest.raises(UserError, match=r"train.max_steps=-3: must be >= 0"):
        check_settings(cfg)
