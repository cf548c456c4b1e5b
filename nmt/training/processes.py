"""The processes of an ensemble's models: started side by side (spawned), watched, and stopped
together. A model that fails fails the run with its one-line reason (or how its process died);
Ctrl-C reaches the ensemble's process alone (the models are started ignoring it), which stops
every model where it is with STOP_SIGNAL, once (held until a model that is still starting can
take it); a model dies with the ensemble's process (Linux).
"""

from __future__ import annotations

import ctypes
import logging
import multiprocessing as mp
import os
import queue
import signal
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from nmt.config.schema import Config
from nmt.system.errors import Interrupted, UserError
from nmt.training.interrupts import stop_on
from nmt.training.session import BEFORE_THE_FIRST_STEP, NOTHING_TO_RESUME, train

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1  # prctl(2)
STOP_SIGNAL = signal.SIGUSR1  # the ensemble's process to a model's: stop as Ctrl-C would
STOP_WAIT_S = 60  # how long a stopped model may take to write its last checkpoint


def member_dir(run_dir: Path, k: int) -> Path:
    """Where model k of the ensemble trains."""
    return run_dir / f"model{k}"


def _log_to(path: Path, k: int) -> None:
    """A model's process logs to its own train.log and, marked with its number, to the console."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = f"[%(asctime)s][model {k}][%(name)s][%(levelname)s] - %(message)s"
    handlers: list[logging.Handler] = [logging.FileHandler(path), logging.StreamHandler(sys.stdout)]  # stdout, as Hydra's console log
    logging.basicConfig(level=logging.INFO, format=fmt, handlers=handlers, force=True)


def _die_with_parent(parent: int) -> None:
    """On Linux, have the kernel stop this process when the ensemble's process dies, even by
    SIGKILL, so that no model trains on unobserved (its last checkpoint stays intact for a resume)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before prctl took effect
        raise SystemExit(1)


def _train_member(cfg: Config, run_dir: Path, k: int, errors: Any, parent: int, set_up: Callable[[], None] | None) -> None:
    """The body of model k's process (spawned: a fresh interpreter, so no state is shared);
    `set_up` (picklable) prepares the process as the command line prepared the ensemble's. It
    ignores Ctrl-C (started so): the ensemble's process stops it with STOP_SIGNAL, once. That
    signal comes blocked (see `run_members`) and is let through once its handler is in place, so
    that a stop sent while this interpreter started is held, not lost or fatal."""
    _die_with_parent(parent)
    _log_to(run_dir / "train.log", k)
    try:
        with stop_on(STOP_SIGNAL):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {STOP_SIGNAL, signal.SIGINT})  # SIGINT stays ignored
            if set_up is not None:
                set_up()
            train(cfg, run_dir)
    except KeyboardInterrupt:  # before `train` took Ctrl-C over
        _report(errors, k, Interrupted(BEFORE_THE_FIRST_STEP))
    except UserError as err:
        _report(errors, k, err)


def _report(errors: Any, k: int, err: UserError) -> None:
    """Log why model k stopped, tell the ensemble's process in one line, and exit with its code."""
    (log.warning if isinstance(err, Interrupted) else log.error)("%s", err)
    errors.put((k, str(err)))
    raise SystemExit(err.exit_code)


def exit_status(code: int | None) -> str:
    """A process's exit code in words: "exit code 3", "killed by signal 9 (SIGKILL)"."""
    if code is not None and code < 0:
        try:
            return f"killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _Reports:
    """The one-line reasons the models' processes sent (a UserError's message, or their interruption)."""

    def __init__(self, errors: Any) -> None:
        self.errors = errors
        self.got: dict[int, str] = {}

    def of(self, k: int, wait_s: float = 2.0) -> str | None:
        deadline = time.monotonic() + wait_s
        while k not in self.got and time.monotonic() < deadline:
            try:
                reported, message = self.errors.get(timeout=0.1)
            except queue.Empty:
                continue
            self.got[reported] = str(message)
        return self.got.get(k)


def run_members(configs: list[Config], run_dir: Path, set_up: Callable[[], None] | None = None) -> None:
    """Start every model's process and wait for all; when one fails, stop the others (their last
    checkpoints stay intact, so `train.resume=auto` continues them) and raise. Ctrl-C stops every
    model where it is (each says so in its log) and raises `Interrupted`."""
    ctx = mp.get_context("spawn")  # not fork: torch's thread pools and locks do not survive a fork
    errors = ctx.Queue()
    reports = _Reports(errors)
    procs: list[BaseProcess] = [
        ctx.Process(target=_train_member, args=(cfg, member_dir(run_dir, k), k, errors, os.getpid(), set_up), name=f"model{k}")
        for k, cfg in enumerate(configs)
    ]
    try:
        # Both inherited by the models: Ctrl-C ignored (a terminal's reaches this process alone) and
        # STOP_SIGNAL blocked (held until a model can take it). SIGINT is blocked here too, so that a
        # Ctrl-C while the models start is held for this process (Linux keeps a blocked signal
        # pending even while it is ignored), not lost.
        default = signal.signal(signal.SIGINT, signal.SIG_IGN)
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {STOP_SIGNAL, signal.SIGINT})
        try:
            for proc in procs:
                proc.start()
        finally:
            signal.signal(signal.SIGINT, default)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        running = list(procs)
        while running:
            wait([p.sentinel for p in running])
            for proc in [p for p in running if p.exitcode is not None]:
                running.remove(proc)
                if proc.exitcode != 0:
                    k = procs.index(proc)
                    reason = reports.of(k) or exit_status(proc.exitcode)
                    raise UserError(f"model {k} of the ensemble failed: {reason} (its log: {member_dir(run_dir, k) / 'train.log'})")
    except KeyboardInterrupt:
        raise _stopped(procs, reports, run_dir) from None
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
            proc.join()
        errors.close()
        errors.join_thread()


def _stopped(procs: list[BaseProcess], reports: _Reports, run_dir: Path) -> Interrupted:
    """Stop every model that still trains (each then logs the step it stopped at and how to resume)
    and say, in one line, where each stood. A second Ctrl-C meanwhile is ignored: the models are
    writing their last words."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for proc in procs:
        if proc.is_alive() and proc.pid is not None:
            os.kill(proc.pid, STOP_SIGNAL)
    for proc in procs:
        proc.join(timeout=STOP_WAIT_S)
    where = [_where(proc, reports.of(k, wait_s=0.5) if proc.exitcode == Interrupted.exit_code else None)
             for k, proc in enumerate(procs)]
    signal.signal(signal.SIGINT, signal.default_int_handler)
    models = ", ".join(f"model {k} {stood}" for k, stood in enumerate(where))
    if all(stood.endswith(NOTHING_TO_RESUME) for stood in where):
        return Interrupted(f"interrupted: {models.replace(NOTHING_TO_RESUME, '')}; nothing to resume")
    return Interrupted(f"interrupted: {models}; resume with train.resume=auto hydra.run.dir={run_dir}")


def _where(proc: BaseProcess, said: str | None) -> str:
    """Where a stopped model stood, from what it said ("at step 29") or how its process ended."""
    if said:
        return said.split(";")[0].removeprefix("interrupted ")
    if proc.exitcode is None:  # `run_members` terminates it
        return f"did not stop within {STOP_WAIT_S} s and was terminated"
    return exit_status(proc.exitcode) if proc.exitcode else "finished"
