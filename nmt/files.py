"""Files that are never half-written, and locks that die with their process.

Every output goes through `atomic_output` (or its `atomic_write_*` shorthands): it is written to a
uniquely named temporary file beside its destination, flushed to disk, and renamed over the
destination, so a reader sees the old file or the new one, never a mix, whatever kills the writer.
Locks are `flock` locks on a file: the kernel releases them when their process ends in any way
(exit, crash, SIGKILL), so a killed process never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

TMP_SUFFIX = ".tmp"


@contextlib.contextmanager
def atomic_output(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary file beside `path` for writing ('w' text or 'wb' bytes); on a clean exit
    it is synced and renamed to `path`, on an exception removed (and `path` left as it was)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    try:
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` (UTF-8) to `path` atomically."""
    with atomic_output(path, "w") as f:
        f.write(text)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` atomically."""
    with atomic_output(path, "wb") as f:
        f.write(data)


def content_digest(path: Path) -> str:
    """SHA-1 of a file's bytes (hex), remembered per (path, size, mtime) within a process."""
    st = path.stat()
    return _digest(str(path.resolve()), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha1").hexdigest()


def temporary_dir(beside: Path) -> Path:
    """A new, uniquely named empty folder next to `beside`, to be renamed onto it when complete."""
    return Path(tempfile.mkdtemp(dir=beside.parent, prefix=f".{beside.name}.", suffix=TMP_SUFFIX))


def remove_orphans(folder: Path) -> list[Path]:
    """Delete the temporary files and folders that killed writers left in `folder` (call this only
    while holding the lock that keeps other writers out of it); returns what was removed."""
    removed = []
    for path in sorted(folder.glob(f".*{TMP_SUFFIX}")):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        removed.append(path)
    return removed


class Busy(Exception):
    """The lock is held by another process (`holder`: what that process wrote into the lock file)."""

    def __init__(self, path: Path, holder: str) -> None:
        super().__init__(f"{path} is held by {holder or 'another process'}")
        self.path, self.holder = path, holder


@contextlib.contextmanager
def file_lock(path: Path, wait: bool, note: str = "", on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing) for the `with` block. `wait`: block
    until it is free (calling `on_wait(holder)` first when it has to wait); otherwise raise `Busy`
    at once. The holder writes `note` (default: its process id) into the file, for the message
    another process shows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            holder = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
            if not wait:
                raise Busy(path, holder) from None
            if on_wait is not None:
                on_wait(holder)
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, (note or f"process {os.getpid()}").encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
