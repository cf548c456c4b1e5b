"""Ctrl-C during training, made dependable.

Python turns SIGINT into a KeyboardInterrupt wherever the main thread happens to be; when that is a
finaliser (a weak reference's callback, a `__del__`), Python prints "Exception ignored" and goes on,
and the training would run on as if nothing had been asked. So the request is also remembered:
`Interrupts.check`, called at every step, raises it again, and the lost one is not printed.
Signals are per process, so there is one `INTERRUPTS` per process; `stop_on` installs it for a
signal for the length of a `with` block.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType


class Interrupts:
    """Remembers that a stop was asked for, and raises KeyboardInterrupt for it."""

    def __init__(self) -> None:
        self.requested = False
        self.depth = 0  # `stop_on` blocks open: an inner one keeps the outer one's request
        self.deferring = 0  # `deferred` blocks open: a request waits for their end

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """A signal handler: ask to stop, now and (if this one is lost) at the next `check`;
        inside `deferred`, at its end."""
        self.requested = True
        if not self.deferring:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Inside, a stop request waits for the block's end (then raises there): for writes that
        an exception in the middle would break, such as torch.save's zip writer, whose cleanup
        raises its own RuntimeError over the KeyboardInterrupt and hides the stop."""
        self.deferring += 1
        try:
            yield
        finally:
            self.deferring -= 1
        if not self.deferring:
            self.check()

    def check(self) -> None:
        """Raise KeyboardInterrupt if a stop was asked for."""
        if self.requested:
            raise KeyboardInterrupt

    def _unraisable(self, info: sys.UnraisableHookArgs) -> None:
        if self.requested and isinstance(info.exc_value, KeyboardInterrupt):
            return  # the request stands; `check` raises it where it can be handled
        sys.__unraisablehook__(info)


INTERRUPTS = Interrupts()


@contextlib.contextmanager
def stop_on(signum: int = signal.SIGINT) -> Iterator[Interrupts]:
    """Inside: `signum` stops training through INTERRUPTS (a fresh request, unless this block is
    inside another: an ensemble's model is stopped by STOP_SIGNAL around the Ctrl-C block of its
    training, and a request the outer block caught in a finaliser must not be forgotten). A signal
    the process ignores (an ensemble's models ignore Ctrl-C: their parent stops them) stays
    ignored; outside the main thread nothing is installed."""
    if INTERRUPTS.depth == 0:
        INTERRUPTS.requested = False
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signum) == signal.SIG_IGN:
        yield INTERRUPTS
        return
    previous, previous_hook = signal.signal(signum, INTERRUPTS.handle), sys.unraisablehook
    sys.unraisablehook = INTERRUPTS._unraisable
    INTERRUPTS.depth += 1
    try:
        yield INTERRUPTS
    finally:
        INTERRUPTS.depth -= 1
        signal.signal(signum, previous)
        sys.unraisablehook = previous_hook
