"""CLI plumbing: user-facing errors (one clear line, no traceback, non-zero exit), typed configs."""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable
from typing import TypeVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

T = TypeVar("T")


class UserError(Exception):
    """A problem with the user's input (file, config key, checkpoint), not a bug."""


def as_schema(cfg: DictConfig, schema: type[T]) -> T:
    """The validated dataclass object of a composed config (Hydra hands CLIs a DictConfig)."""
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, schema), f"config is {type(obj).__name__}, expected {schema.__name__}"
    return obj


def exit_on_user_error(fn: Callable[..., T]) -> Callable[..., T]:
    """Wrap a CLI entry point: a UserError or config error prints one line and exits with 2."""

    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> T:
        try:
            return fn(*args, **kwargs)
        except (UserError, OmegaConfBaseException) as err:
            logging.getLogger("nmt").debug("user error", exc_info=True)
            print(f"error: {err}", file=sys.stderr)
            sys.exit(2)

    return wrapper
