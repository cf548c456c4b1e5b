"""Plumbing shared by the command-line modules (and only by them).

Every bad input ends the same way, wherever it is found: one line `error: ...` on stderr that names
the key, file or line, and exit code 2. That covers Hydra's own config errors (an unknown key, a
value of the wrong type or outside an enum, a config group option that does not exist), which
Hydra would otherwise report over several lines with exit code 1, our range and path checks, and
every UserError raised while the command runs. The same line ends the run's log file, if it has one.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import datasets
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from nmt.config.checks import check_settings
from nmt.config.commands import CONFIGS, register_configs
from nmt.config.schema import Config
from nmt.system.errors import Interrupted, UserError
from nmt.system.files import disk_full, no_space

T = TypeVar("T")
CONFIG_ERRORS = (UserError, OmegaConfBaseException, HydraException)
_DIAGNOSTICS = ("full_key:", "object_type=", "reference_type=", "To append to your config", "Set the environment variable", "See https://")


def one_line(err: BaseException) -> str:
    """A config or user error as one line: the message's first line, the root cause's first line,
    and the valid options when the message lists them (Hydra's missing config group option)."""
    parts: list[str] = []
    if isinstance(getattr(err, "override", None), str):  # Hydra's OverrideParseException
        parts.append(f"cannot parse the override '{err.override}'")  # type: ignore[attr-defined]
    current: BaseException | None = err
    while current is not None:
        lines = [line.strip() for line in str(current).splitlines() if line.strip() and not line.strip().startswith(_DIAGNOSTICS)]
        # a cause the message already quotes (`f"... ({err})" from err`) is not said twice
        if lines and not any(lines[0].rstrip(".") in part for part in parts):
            parts.append(lines[0].rstrip("."))
        listed = [k for k, line in enumerate(lines) if line.startswith("Available options")]
        if listed:
            options = itertools.takewhile(lambda line: not line.endswith(":"), lines[listed[0] + 1 :])
            parts.append("available: " + ", ".join(options))
        current = current.__cause__
    return ": ".join(parts) or type(err).__name__


def log_to_run_files(message: str, exc_info: bool = False) -> None:
    """Write `message` to the log files of this run only (Hydra's train.log), not to the console,
    where the same line is printed once already."""
    root = logging.getLogger()
    record = root.makeRecord("nmt", logging.ERROR, __file__, 0, message, (), sys.exc_info() if exc_info else None)
    for handler in root.handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def fail(err: BaseException) -> NoReturn:
    """Print `err` as one line on stderr (and into the run's log), and exit with its code: 2 for
    bad input, 130 for an interruption."""
    message = one_line(err) if isinstance(err, Interrupted) else f"error: {one_line(err)}"
    if getattr(err, "log_to_run", True):
        log_to_run_files(message)
    print(message, file=sys.stderr)
    sys.exit(getattr(err, "exit_code", 2))


def exit_on_user_error(fn: Callable[..., T]) -> Callable[..., T]:
    """Wrap a command's task function: a user or config error prints one line and exits with 2,
    Ctrl-C one line and 130; a crash (a bug) also goes into the run's log file, with its traceback,
    before it propagates."""

    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> T:
        try:
            return fn(*args, **kwargs)
        except CONFIG_ERRORS as err:
            fail(err)
        except KeyboardInterrupt:
            fail(Interrupted("interrupted before it finished; no output was left half-written"))
        except Exception as err:
            full = no_space(err)
            if full is not None:  # a write no nmt module names (most do: nmt.system.files.disk_full)
                fail(disk_full(full.filename or os.getcwd(), "what was written before is kept"))
            log_to_run_files("error: the run stopped on an unexpected exception", exc_info=True)
            raise

    return wrapper


def run(main: Callable[[], Any]) -> None:
    """Run a `@hydra.main` entry point so that Hydra's config errors also end as one line and exit 2
    (Hydra re-raises them to us when HYDRA_FULL_ERROR is set, instead of printing them itself)."""
    register_configs()
    os.environ["HYDRA_FULL_ERROR"] = "1"
    quiet_failures()
    try:
        main()
    except CONFIG_ERRORS as err:
        fail(err)
    except KeyboardInterrupt:
        fail(Interrupted("interrupted before it started"))


def quiet_failures() -> None:
    """In this process, a log line that cannot be written (a full disk) is dropped, not printed
    with a traceback, and so is a background writer's failure on a full disk."""
    logging.raiseExceptions = False
    threading.excepthook = _quiet_when_disk_full


def set_up_worker() -> None:
    """A training process an ensemble starts: quiet as its command line (no progress bars: the
    models' logs interleave)."""
    quiet_libraries(False)
    quiet_failures()


def _quiet_when_disk_full(args: threading.ExceptHookArgs) -> None:
    """A background writer (TensorBoard's) that found the disk full dies quietly: the main thread
    meets the same error on its next write and reports it in one line."""
    if args.exc_value is not None and no_space(args.exc_value) is not None:
        return
    threading.__excepthook__(args)


def typed_config(cfg: DictConfig, schema: type[T]) -> T:
    """The composed config as its schema object, with every setting checked (`check_settings`)."""
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, schema), f"config is {type(obj).__name__}, expected {schema.__name__}"
    check_settings(obj)
    return obj


def quiet_libraries(progress: bool) -> None:
    """Keep the terminal for our own output: datasets' progress bars only when asked for (and on a
    terminal), its log messages only when they are errors."""
    datasets.logging.set_verbosity_error()
    if progress and sys.stderr.isatty():
        datasets.enable_progress_bars()
    else:
        datasets.disable_progress_bars()


def compose_train_config(overrides: list[str]) -> Config:
    """The training config `configs/config.yaml` with Hydra overrides, as `nmt.train` composes it,
    checked (for scripts that take the same overrides without being Hydra apps)."""
    from hydra import compose, initialize_config_dir

    register_configs()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    return typed_config(cfg, Config)
