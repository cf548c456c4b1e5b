"""`train.ensemble_size=N`: N models trained side by side, then decoded as one ensemble.

Each model is an ordinary training run of its own process, in `{run dir}/model{k}/` (its own
checkpoints, TensorBoard events, log and metrics.json), with seed `seed + k` (so its initial
weights, batch order and dropout differ) and `train.threads` threads (0: the cores shared out).
All read the data this process prepared first and spend the same budget at the same time. When
the last one ends, `{run dir}/checkpoints/last.pt` (their last.pt files) and `best.pt` (their
best.pt files, or their last.pt files when those validate better together) are written as
ensemble checkpoints, which every command decodes as an ensemble (the mean of the models'
probabilities; their mean attention as the alignment), and `{run dir}/metrics.json` gets the
ensemble's validation and test scores.

Why: on a few CPU cores torch's threads scale poorly on this model's small matrix products, so
N one-thread trainings do more work per minute than one N-thread training, and an ensemble of
independently trained models scores above each of them.
"""

from __future__ import annotations

import copy
import ctypes
import json
import logging
import multiprocessing as mp
import os
import queue
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import torch

from nmt.checkpoint import ensemble_checkpoint, load_checkpoint, save_checkpoint
from nmt.config import Config
from nmt.errors import Interrupted, UserError
from nmt.interrupts import stop_on
from nmt.resume import check_continuable, hold_run_dir, load_resumable, resume_checkpoint
from nmt.run_report import run_choices, save_metrics, scores_of, test_report
from nmt.trainer import prepare_checked, train

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1  # prctl(2)
STOP_SIGNAL = signal.SIGUSR1  # the ensemble's process to a model's: stop as Ctrl-C would


@dataclass
class EnsembleResult:
    """What an ensemble training measured: the ensemble's validation scores (of best.pt) and each model's metrics.json."""

    valid: dict[str, float]
    members: list[dict[str, Any]]

    @property
    def best_bleu(self) -> float:
        return self.valid["bleu"]


def member_dir(run_dir: Path, k: int) -> Path:
    """Where model k of the ensemble trains."""
    return run_dir / f"model{k}"


def member_device(device: str, k: int) -> str:
    """Model k's device: with several GPUs the models take them in turn; otherwise the run's device."""
    gpus = torch.cuda.device_count() if device in ("auto", "cuda") else 0
    return f"cuda:{k % gpus}" if gpus > 1 else device


def member_config(cfg: Config, k: int) -> Config:
    """The training config of model k: its own seed, its share of the cores, no progress bar (the
    models' logs interleave), no test of its own (the ensemble is tested), and its own run to resume."""
    member = copy.deepcopy(cfg)
    tc = member.train
    member.seed = cfg.seed + k
    tc.ensemble_size = 1
    tc.threads = cfg.train.threads or max(1, len(os.sched_getaffinity(0)) // cfg.train.ensemble_size)
    tc.device = member_device(cfg.train.device, k)
    tc.progress = False
    tc.test_at_end = False
    if tc.resume not in ("", "auto"):
        tc.resume = str(member_dir(Path(tc.resume), k))
    return member


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
    ignores Ctrl-C (started so): the ensemble's process stops it with STOP_SIGNAL, once."""
    _die_with_parent(parent)
    _log_to(run_dir / "train.log", k)
    if set_up is not None:
        set_up()
    try:
        with stop_on(STOP_SIGNAL):
            train(cfg, run_dir)
    except UserError as err:
        (log.warning if isinstance(err, Interrupted) else log.error)("%s", err)
        errors.put((k, str(err)))
        raise SystemExit(err.exit_code) from None


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


def _run_members(configs: list[Config], run_dir: Path, set_up: Callable[[], None] | None = None) -> None:
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
        default = signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited: a terminal's Ctrl-C reaches this process alone
        try:
            for proc in procs:
                proc.start()
        finally:
            signal.signal(signal.SIGINT, default)
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
        proc.join(timeout=60)
    where = []
    for k, proc in enumerate(procs):
        said = reports.of(k, wait_s=0.5) if proc.exitcode == Interrupted.exit_code else None
        step = said.split(";")[0].removeprefix("interrupted ") if said else exit_status(proc.exitcode) if proc.exitcode else "finished"
        where.append(f"model {k} {step}")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    return Interrupted(f"interrupted: {', '.join(where)}; resume with train.resume=auto hydra.run.dir={run_dir}")


def write_ensemble(cfg: Config, run_dir: Path) -> tuple[str, dict[str, dict[str, float]]]:
    """`{run_dir}/checkpoints/last.pt`: the models' last.pt files as one ensemble checkpoint;
    `best.pt`: of the ensemble of their best.pt files and that one, the one with the better
    validation BLEU (as `train.decode` decodes; a tie keeps their best.pt files), as a model's
    best.pt is its best validation. Each model's best.pt is chosen by its own validation, which
    need not make the best pair: under a budget schedule the last weights often validate better
    together. -> (which of the models' checkpoints best.pt holds, each candidate's validation
    scores by the name of the models' checkpoints it holds)."""
    folder, scores = run_dir / "checkpoints", {}
    for name in ("last.pt", "best.pt"):
        paths = [member_dir(run_dir, k) / "checkpoints" / name for k in range(cfg.train.ensemble_size)]
        save_checkpoint(folder / name, ensemble_checkpoint(paths))
        scores[name] = scores_of(cfg, folder / name, "valid")
    chosen = "last.pt" if scores["last.pt"]["bleu"] > scores["best.pt"]["bleu"] else "best.pt"
    if chosen == "last.pt":
        save_checkpoint(folder / "best.pt", load_checkpoint(folder / "last.pt"))
        for stale in folder.glob("best.*.hyp"):  # the hypotheses and report of the candidate it replaces
            stale.with_suffix(".json").unlink(missing_ok=True)
            stale.unlink()
    return chosen, scores


def ensemble_metrics(cfg: Config, run_dir: Path, members: list[dict[str, Any]], minutes: float, chosen: str,
                     candidates: dict[str, dict[str, float]]) -> dict[str, Any]:
    """metrics.json of the ensemble: the run's choices, its models' own metrics, the validation
    scores of both candidates for best.pt and which one it is, and (with `train.test_at_end`) the test scores of best.pt."""
    metrics: dict[str, Any] = {
        **run_choices(cfg), "ensemble_size": len(members), "steps": max(m["steps"] for m in members), "minutes": round(minutes, 2),
        "tokens_per_s": round(sum(m["tokens_per_s"] for m in members), 1), "parameters": sum(m["parameters"] for m in members),
        "stop": "; ".join(sorted({m["stop"] for m in members})),
        "valid": candidates[chosen], "best_pt_holds": f"the models' {chosen}", "valid_candidates": candidates,
        "members": members,
    }
    if cfg.train.test_at_end:
        metrics["test"] = test_report(cfg, run_dir)
    return metrics


def train_ensemble(cfg: Config, run_dir: Path, on_start: Callable[[], None] | None = None,
                   set_up: Callable[[], None] | None = None) -> EnsembleResult:
    """Train `train.ensemble_size` models at once into `run_dir/model{k}` and write their ensemble
    checkpoints and metrics.json into `run_dir` (held for the whole run, as `nmt.trainer.train` holds
    its own). Nothing is written before every model is known to continue its run or start one where
    none is (`check_continuable`, `load_resumable`); `on_start` runs then, `set_up` (picklable)
    first thing in every model's process."""
    size = cfg.train.ensemble_size
    run_dir = Path(run_dir)
    with hold_run_dir(run_dir):
        check_continuable(cfg, run_dir)
        data = prepare_checked(cfg)  # once, here: the models then read the cache instead of racing to fill it
        configs = [member_config(cfg, k) for k in range(size)]
        for k, member in enumerate(configs):  # every model continues its run, or the run is refused before any is written
            path = resume_checkpoint(member.train.resume, member_dir(run_dir, k))
            if path is not None:
                load_resumable(path, member, data.src_tokenizer.model_proto, data.tgt_tokenizer.model_proto)
        if on_start is not None:
            on_start()
        log.info("training %d models side by side (seeds %s, %d thread(s) each) into %s/model*", size,
                 ", ".join(str(c.seed) for c in configs), configs[0].train.threads, run_dir)
        started = time.monotonic()
        _run_members(configs, run_dir, set_up)
        try:
            return finish_ensemble(cfg, run_dir, (time.monotonic() - started) / 60)
        except KeyboardInterrupt:
            raise Interrupted(f"interrupted while writing the ensemble's checkpoints; its models are trained: write them with "
                              f"train.resume=auto hydra.run.dir={run_dir}") from None


def finish_ensemble(cfg: Config, run_dir: Path, minutes: float) -> EnsembleResult:
    """After the models' trainings (in `run_dir/model{k}`, `minutes` long): the ensemble
    checkpoints, their scores and metrics.json."""
    size = cfg.train.ensemble_size
    chosen, candidates = write_ensemble(cfg, run_dir)
    members = [json.loads((member_dir(run_dir, k) / "metrics.json").read_text()) for k in range(size)]
    metrics = ensemble_metrics(cfg, run_dir, members, minutes, chosen, candidates)
    save_metrics(cfg, run_dir, metrics)
    test = metrics.get("test", {}).get("bleu")
    log.info("ensemble of %d (best.pt: %s): valid BLEU %.2f (models %s)%s", size, metrics["best_pt_holds"], metrics["valid"]["bleu"],
             ", ".join(f"{m['valid']['bleu']:.2f}" for m in members), f"; test BLEU {test:.2f}" if test is not None else "")
    return EnsembleResult(metrics["valid"], members)
