"""Files that are never half-written, and locks that die with their process.

Every output goes through `atomic_output` (or its `atomic_write_*` shorthands): it is written to a
uniquely named temporary file beside its destination, flushed to disk, and renamed over the
destination, so a reader sees the old file or the new one, never a mix, whatever kills the writer.
The file gets the mode a plain `open()` would give it (the destination's own, or 0666 less the
umask), not the 0600 of a temporary file: a group or a TensorBoard server of another user reads it.
A full disk is a `UserError` naming the file and the space left, and the destination stays as it was.
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
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from nmt.system.errors import UserError

TMP_SUFFIX = ".tmp"
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def umask() -> int:
    """The process's umask, read without changing it (os.umask can only be read by setting it,
    which would race with other threads creating files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    current = os.umask(0o022)
    os.umask(current)
    return current


def plain_mode(path: Path, directory: bool = False) -> int:
    """The permission bits `open(path, "w")` (or `mkdir`) would leave: an existing file's own, else
    0666 (0777 for a folder) less the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return (0o777 if directory else 0o666) & ~umask()


def no_space(err: BaseException) -> OSError | None:
    """The 'no space left on device' (or quota) error in `err`'s chain of causes, if there is one:
    torch, for one, wraps the OSError of a failed write in a RuntimeError of its own."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in _NO_SPACE:
            return current
        current = current.__cause__ or current.__context__
    return None


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def disk_full(path: str | Path, kept: str | None = None) -> UserError:
    """The one-line error of a write to `path` that found no space left; `kept`: what of the file
    survives (default: what `atomic_output` guarantees)."""
    folder = Path(path).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        free = f"{human_bytes(shutil.disk_usage(folder).free)} free"
    except OSError:
        free = "free space unknown"
    if kept is None:
        kept = "its earlier version is intact" if Path(path).exists() else "nothing was written"
    return UserError(f"{path}: no space left on the device ({free} in {folder}); {kept}")


@contextlib.contextmanager
def atomic_output(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary file beside `path` for writing ('w' text or 'wb' bytes); on a clean exit
    it is synced and renamed to `path`, on an exception removed (and `path` left as it was)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    try:
        os.fchmod(fd, plain_mode(path))
        with os.fdopen(fd, mode, encoding=None if "b" in mode else encoding) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if no_space(err) is not None:
            raise disk_full(path) from None
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
    """A new, uniquely named empty folder next to `beside`, to be renamed onto it when complete
    (with the mode `mkdir` would give it, not mkdtemp's 0700)."""
    folder = Path(tempfile.mkdtemp(dir=beside.parent, prefix=f".{beside.name}.", suffix=TMP_SUFFIX))
    folder.chmod(plain_mode(beside, directory=True))
    return folder


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
