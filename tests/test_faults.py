"""Faults a user meets: a resume that cannot continue, a full disk, Ctrl-C, closed or broken
streams, a restrictive umask, and checkpoints that are not checkpoints. Each ends in one line (exit
2, or 130 for Ctrl-C, 141 for a reader that went away) and loses nothing."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import torch
from support import ROOT, assert_user_error, cli, compose_config, toy_overrides

from nmt.model.checkpoint import load_checkpoint, save_checkpoint
from nmt.system.errors import UserError
from nmt.system.files import atomic_write_text, temporary_dir
from nmt.training.interrupts import stop_on
from nmt.training.processes import STOP_WAIT_S, _where, exit_status, run_members

RUN = ["train.max_steps=4", "train.valid_every=2", "train.test_at_end=false", "log.attention_examples=1"]


def train_args(workdir: Path, run_dir: Path, extra: list[str] | None = None) -> list[str]:
    return [*toy_overrides(workdir, task="copy", n_train=200), *RUN, f"hydra.run.dir={run_dir}", *(extra or [])]


def snapshot(run_dir: Path) -> dict[str, bytes]:
    """Every file of a run but its lock and its log (a refused attempt's lines are added to it)."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name not in (".lock", "train.log")}


@pytest.fixture(scope="module")
def one_model_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished one-model toy run made from the command line (4 steps); returns its folder."""
    workdir = tmp_path_factory.mktemp("faults")
    proc = cli("nmt.train", train_args(workdir, workdir / "run"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return workdir / "run"


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    return copy


# --- a resume continues exactly what is there, or refuses ------------------------------------


SLOW = pytest.mark.slow


@pytest.mark.parametrize(("extra", "message"), [
    (["train.resume=auto", "train.ensemble_size=2"],
     "train.ensemble_size=2 cannot continue {run}: it holds one model's run; resume it with train.ensemble_size=1"),
    (["train.resume=auto", "model.decoder.hidden_size=48"],
     "{run}/checkpoints/last.pt: checkpoint comes from an incompatible config (model.decoder.hidden_size: checkpoint 64, now 48)"),
    pytest.param(["train.resume=auto", "data.toy.n_symbols=7"],
                 "{run}/checkpoints/last.pt: checkpoint comes from an incompatible config (data.toy.n_symbols: checkpoint 20, now 7)",
                 marks=SLOW),
    pytest.param(["train.resume=auto", "seed=5"],
                 "{run}/checkpoints/last.pt: checkpoint comes from an incompatible config (seed: checkpoint 42, now 5)", marks=SLOW),
    ([], "{run} already holds one model's run ({run}/checkpoints/best.pt); continue it with train.resume=auto, or choose another"),
    pytest.param(["train.init_from={run}/checkpoints/best.pt"], "{run} already holds one model's run", marks=SLOW),
])
def test_a_run_that_cannot_be_continued_is_refused_and_left_as_it_was(one_model_run: Path, tmp_path: Path, extra: list[str],
                                                                       message: str) -> None:
    run = copy_of(one_model_run, tmp_path)
    before, log = snapshot(run), (run / "train.log").read_text()
    proc = cli("nmt.train", train_args(one_model_run.parent, run, [e.format(run=run) for e in extra]))
    assert_user_error(proc, message.format(run=run))
    assert snapshot(run) == before
    assert (run / "train.log").read_text().startswith(log)


def test_a_resume_with_only_the_budget_changed_continues_the_run(one_model_run: Path, tmp_path: Path) -> None:
    run = copy_of(one_model_run, tmp_path)
    proc = cli("nmt.train", train_args(one_model_run.parent, run, ["train.resume=auto", "train.max_steps=6"]))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert load_checkpoint(run / "checkpoints" / "last.pt").step == 6


# --- a full disk ------------------------------------------------------------------------------


def _mount_tmpfs_works() -> bool:
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "d=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs $d"],
                           capture_output=True) if shutil.which("unshare") else None
    return probe is not None and probe.returncode == 0


@pytest.mark.slow
@pytest.mark.skipif(not _mount_tmpfs_works(), reason="no user and mount namespaces here to mount a small tmpfs in")
@pytest.mark.parametrize(("room_kib", "full_at"), [(64, ""), (3000, "checkpoints/")])
def test_training_onto_a_full_disk_is_one_line_naming_the_file_and_the_free_space(workdir: Path, room_kib: int, full_at: str) -> None:
    """A real full disk: the run directory on a small tmpfs (in a mount namespace of the test's own),
    too small for the first validation's outputs, or for a third checkpoint of 1.2 MB beside two."""
    prepared = cli("nmt.data", toy_overrides(workdir, task="copy", n_train=200))  # the data cache stays outside the tmpfs
    assert prepared.returncode == 0, prepared.stderr[-2000:]
    disk, kept = workdir / "disk", workdir / "kept"
    disk.mkdir()
    args = train_args(workdir, disk / "run", ["train.max_steps=8"])
    script = 'mount -t tmpfs -o size="$1"k tmpfs "$2" && "${@:4}"; rc=$?; cp -a "$2"/run "$3"; exit $rc'
    proc = subprocess.run(["unshare", "-rm", "bash", "-c", script, "bash", str(room_kib), str(disk), str(kept), sys.executable, "-m",
                           "nmt.train", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {disk / 'run' / full_at}"), proc.stderr[-3000:]
    assert ": no space left on the device (" in lines[0] and " free in " in lines[0], lines[0]
    assert (kept / "train.log").read_text().strip().splitlines()[-1].endswith(lines[0]) or room_kib < 100  # (no room for the log)
    for ckpt in kept.rglob("*.pt"):
        assert load_checkpoint(ckpt).step in (2, 4)
    assert not list(kept.rglob(".*.tmp"))


def test_a_checkpoint_that_does_not_fit_on_the_disk_is_one_error_and_the_old_one_stays(tmp_path: Path,
                                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """torch wraps the OSError of a failed write in a RuntimeError ("unexpected pos"); simulated here."""
    from nmt.model.checkpoint import Checkpoint

    path = tmp_path / "checkpoints" / "last.pt"
    spm = torch.zeros(1, dtype=torch.uint8)
    old = Checkpoint(model={"w": torch.ones(2)}, config={}, src_spm=spm, tgt_spm=spm)
    save_checkpoint(path, old)
    before = path.read_bytes()

    def full(payload: object, f: object) -> None:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as err:
            raise RuntimeError("PytorchStreamWriter failed writing file data/0: unexpected pos") from err

    monkeypatch.setattr(torch, "save", full)
    expected = rf"^{path}: no space left on the device \(.* free in {path.parent}\); its earlier version is intact$"
    with pytest.raises(UserError, match=expected):
        save_checkpoint(path, old)
    assert path.read_bytes() == before and not list(path.parent.glob(".*.tmp"))


# --- Ctrl-C -----------------------------------------------------------------------------------


def _spawned_models(pid: int) -> int:
    """How many of process `pid`'s children are a model's interpreter (spawned: `spawn_main`)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return sum(b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes() for child in children
               if Path(f"/proc/{child}/cmdline").exists())


def _interrupt(cmd: list[str], run_dir: Path, ready: str | None, group: bool) -> subprocess.CompletedProcess[str]:
    """Start `cmd`, wait until `ready` is in the run's log (or, if None, until both of the ensemble's
    models' interpreters are started: they are still importing), then Ctrl-C it (SIGINT to its
    process group, as a terminal sends it, or to its process alone)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 180
    logs = [run_dir / "train.log", *(run_dir / f"model{k}" / "train.log" for k in range(2))]

    def is_ready() -> bool:
        if ready is None:
            return _spawned_models(proc.pid) == 2
        return any(log.is_file() and ready in log.read_text() for log in logs)

    while not is_ready():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.005 if ready is None else 0.1)
    time.sleep(0 if ready is None else 0.5)
    os.killpg(proc.pid, signal.SIGINT) if group else proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(cmd, proc.returncode, "", err)


def long_run(workdir: Path, run_dir: Path, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "nmt.train", *toy_overrides(workdir, task="copy", n_train=2000), "train.max_steps=100000",
            "train.valid_every=20", "train.early_stopping_patience=100000", "train.test_at_end=false", f"hydra.run.dir={run_dir}",
            *extra]


def test_ctrl_c_ends_a_training_with_one_line_that_says_how_to_resume(workdir: Path) -> None:
    run = workdir / "run"
    proc = _interrupt(long_run(workdir, run, []), run, "step 20 valid", group=True)
    assert proc.returncode == 130, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interrupted at step "), proc.stderr[-3000:]
    saved = load_checkpoint(run / "checkpoints" / "last.pt").step
    assert lines[0].endswith(f"; resume with train.resume=auto hydra.run.dir={run} (it continues from checkpoints/last.pt, step {saved})")
    assert (run / "train.log").read_text().strip().splitlines()[-1].endswith(lines[0])


@pytest.mark.slow
@pytest.mark.parametrize("group", [True, False])  # a terminal's Ctrl-C reaches every model too; `kill -INT` the parent alone
def test_ctrl_c_stops_every_model_of_an_ensemble_in_one_line(workdir: Path, group: bool) -> None:
    run = workdir / "run"
    proc = _interrupt(long_run(workdir, run, ["train.ensemble_size=2"]), run, "step 20 valid", group=group)
    assert proc.returncode == 130, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("interrupted: model 0 at step ") and ", model 1 at step " in lines[0], lines[0]
    assert lines[0].endswith(f"; resume with train.resume=auto hydra.run.dir={run}")
    for k in range(2):
        assert "interrupted at step" in (run / f"model{k}" / "train.log").read_text().strip().splitlines()[-1]
    assert (run / "train.log").read_text().strip().splitlines()[-1].endswith(lines[0])


@pytest.mark.slow
def test_ctrl_c_while_the_models_start_stops_them_in_one_line(workdir: Path) -> None:
    """The stop reaches models whose interpreters are still starting: it is held until each can
    take it (it once killed them by its signal, or left a traceback)."""
    run = workdir / "run"
    proc = _interrupt(long_run(workdir, run, ["train.ensemble_size=2"]), run, None, group=False)
    assert proc.returncode == 130, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert lines == ["interrupted: model 0 before the first step, model 1 before the first step; nothing to resume"], proc.stderr[-3000:]
    for k in range(2):
        last = (run / f"model{k}" / "train.log").read_text().strip().splitlines()[-1]
        assert last.endswith("interrupted before the first step: nothing to resume"), last


class _StoppedInAFinaliser:
    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGUSR1)  # its KeyboardInterrupt is raised here, where Python cannot raise it
        time.sleep(0.01)


def test_a_stop_lost_in_a_finaliser_outlives_a_nested_block(capsys: pytest.CaptureFixture[str]) -> None:
    """An ensemble's model is stopped by STOP_SIGNAL around its training's own Ctrl-C block; a stop
    that landed in a finaliser must still be raised at the next check, inside the inner block."""
    with stop_on(signal.SIGUSR1) as interrupts:
        _StoppedInAFinaliser()
        assert interrupts.requested
        with stop_on(signal.SIGINT), pytest.raises(KeyboardInterrupt):
            interrupts.check()
    with stop_on(signal.SIGINT) as fresh:
        fresh.check()  # a block of its own starts with no request
    assert "Exception ignored" not in capsys.readouterr().err


def test_a_model_that_does_not_stop_is_said_to_have_been_terminated() -> None:
    assert _where(cast(Any, SimpleNamespace(exitcode=None)), None) == f"did not stop within {STOP_WAIT_S} s and was terminated"
    assert _where(cast(Any, SimpleNamespace(exitcode=0)), None) == "finished"


# --- closed and broken streams ------------------------------------------------------------------


def _translate(ckpt: Path, args: list[str], closed: int | None = None, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "nmt.translate", f"ckpt={ckpt}", *args], cwd=ROOT, text=True,
                            preexec_fn=(lambda: os.close(closed)) if closed is not None else None, **kwargs)  # type: ignore[call-overload]


def test_translate_with_closed_or_broken_streams_is_one_line_or_a_quiet_stop(one_model_run: Path, tmp_path: Path) -> None:
    ckpt = one_model_run / "checkpoints" / "best.pt"
    source = tmp_path / "in.txt"
    source.write_text("w1 w2 w3\n" * 20000)
    no_stdin = _translate(ckpt, [], closed=0, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert_user_error(subprocess.CompletedProcess([], no_stdin.wait(60), *no_stdin.communicate()),
                      "standard input is closed: give input=FILE, or pipe the text in")
    no_stdout = _translate(ckpt, [f"input={source}"], closed=1, stderr=subprocess.PIPE)
    assert_user_error(subprocess.CompletedProcess([], no_stdout.wait(60), "", no_stdout.communicate()[1]),
                      "standard output is closed: give output=FILE")
    gone = _translate(ckpt, [f"input={source}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert gone.stdout is not None
    gone.stdout.close()  # `| head -c 0`: the reader goes away before reading anything
    _, err = gone.communicate(timeout=120)
    assert gone.returncode == 128 + signal.SIGPIPE and err == "", err[-2000:]
    assert_user_error(cli("nmt.translate", [f"ckpt={ckpt}", f"input={source}", f"output={tmp_path}"]),
                      f"output={tmp_path}: is a directory; expected a file to write")


# --- files get the mode a plain open() gives -----------------------------------------------------


def test_written_files_get_the_mode_a_plain_open_gives_under_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "new.txt", "x")
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
        existing = tmp_path / "existing.txt"
        existing.write_text("x")
        existing.chmod(0o604)
        atomic_write_text(existing, "y")
        folder = temporary_dir(tmp_path / "folder")
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(tmp_path / "new.txt") == mode(plain) == 0o640
    assert mode(existing) == 0o604  # as open() keeps an existing file's mode
    assert mode(folder) == 0o750

@pytest.mark.slow

def test_a_training_under_a_group_umask_writes_files_the_group_can_read(workdir: Path) -> None:
    run = workdir / "run"
    proc = subprocess.run([sys.executable, "-m", "nmt.train", *train_args(workdir, run)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, preexec_fn=lambda: os.umask(0o002))
    assert proc.returncode == 0, proc.stderr[-2000:]
    files = [p for p in run.rglob("*") if p.is_file() and p.name != ".lock"]
    assert {"checkpoints/best.pt", "metrics.json", ".hydra/config.yaml", "train.log"} <= {str(p.relative_to(run)) for p in files}
    assert {str(p.relative_to(run)): oct(stat.S_IMODE(p.stat().st_mode)) for p in files if stat.S_IMODE(p.stat().st_mode) != 0o664} == {}


# --- messages ---------------------------------------------------------------------------------


def test_a_directory_as_the_checkpoint_says_so(one_model_run: Path) -> None:
    for module in ("nmt.evaluate", "nmt.translate", "nmt.align"):
        assert_user_error(cli(module, [f"ckpt={one_model_run}"]),
                          f"ckpt={one_model_run}: is a directory; expected a checkpoint (such as {one_model_run}/checkpoints/best.pt)")


class _Payload:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, ("echo this must never run",))


@pytest.mark.parametrize(("content", "message"), [
    (b"hello\nworld\n", "not a checkpoint: not the zip archive that nmt.train writes"),
    (b"", "not a checkpoint: the file is empty"),
    ("pickle", "refused: the checkpoint holds a Python object (posix.system) that only running code could rebuild"),
    ("flipped", "a corrupt checkpoint ("),
])
def test_a_file_that_is_no_checkpoint_is_one_short_line(one_model_run: Path, tmp_path: Path, content: bytes | str, message: str) -> None:
    ckpt = tmp_path / "bad.pt"
    if content == "pickle":
        torch.save({"model": _Payload()}, ckpt)
    elif content == "flipped":
        data = bytearray((one_model_run / "checkpoints" / "best.pt").read_bytes())
        start = data.index(b"data.pkl") + 60  # inside the pickled structure
        data[start: start + 24] = bytes(b ^ 0x5A for b in data[start: start + 24])
        ckpt.write_bytes(bytes(data))
    else:
        ckpt.write_bytes(content)  # type: ignore[arg-type]
    proc = cli("nmt.evaluate", [f"ckpt={ckpt}"])
    assert_user_error(proc, f"error: {ckpt}: {message}")
    line = proc.stderr.strip()
    assert len(line) < 300 and "weights_only" not in line and "\x1b" not in line and "must never run" not in proc.stdout, line


def _die_by_sigkill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)

@pytest.mark.slow
def test_a_killed_model_of_an_ensemble_is_named_by_its_signal(workdir: Path) -> None:
    cfg = compose_config(toy_overrides(workdir, task="copy", n_train=100))
    with pytest.raises(UserError, match=r"^model 0 of the ensemble failed: killed by signal 9 \(SIGKILL\) \(its log: "):
        run_members([cfg], workdir / "run", set_up=_die_by_sigkill)
    assert exit_status(-15) == "killed by signal 15 (SIGTERM)" and exit_status(3) == "exit code 3"
