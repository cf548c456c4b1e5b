"""Run the command-line modules many times, fast: a zygote process imports the libraries once,
then forks one child per command, which runs `python -m MODULE ARGS` (the module as `__main__`,
exactly as the interpreter would) with its own stdin, stdout, stderr, working folder and
environment. The zygote itself never computes (no thread pools exist when it forks), waits for
each child with a timeout, and kills it if it hangs.

Protocol: one JSON request per line on the zygote's stdin, one JSON answer per line on its stdout.
"""

from __future__ import annotations

import io
import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Result:
    returncode: int  # -9 (killed) when it timed out
    timed_out: bool
    stdout: str
    stderr: str


class CliRunner:
    """The test side: start the zygote, send it commands."""

    def __init__(self, cwd: Path, env: dict[str, str] | None = None) -> None:
        self.cwd = cwd
        self.proc = subprocess.Popen([sys.executable, __file__], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env={**os.environ, **(env or {})})

    def run(self, module: str, args: list[str], timeout: float = 60, stdin: bytes = b"") -> Result:
        """`python -m module args` with this process's environment, `stdin` as its input."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = {"module": module, "args": args, "timeout": timeout, "stdin": stdin.decode("latin-1"), "env": dict(os.environ)}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        return Result(answer["rc"], answer["timed_out"], answer["stdout"], answer["stderr"])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _child(request: dict, out: str, err: str, inp: str) -> None:
    """In the forked child: become `python -m module args` and exit with its status."""
    os.setsid()  # its own process group: a timeout kills whatever it started too
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in ((0, inp, os.O_RDONLY), (1, out, os.O_WRONLY), (2, err, os.O_WRONLY)):
        os.dup2(os.open(path, flags), fd)
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", line_buffering=True)
    sys.argv = [request["module"], *request["args"]]
    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _serve() -> None:
    # What every command imports, imported once; nothing here starts a thread pool.
    import datasets  # noqa: F401
    import hydra  # noqa: F401
    import torch  # noqa: F401

    import nmt.system.cli  # noqa: F401
    import nmt.training.session  # noqa: F401

    for line in sys.stdin:
        request = json.loads(line)
        with tempfile.TemporaryDirectory() as tmp:
            out, err, inp = (os.path.join(tmp, name) for name in ("out", "err", "in"))
            for path in (out, err):
                open(path, "w").close()
            Path(inp).write_bytes(request["stdin"].encode("latin-1"))
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:
                _child(request, out, err, inp)
            deadline, status, timed_out = time.monotonic() + request["timeout"], None, False
            while status is None:
                done, code = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = os.waitstatus_to_exitcode(code)
                elif time.monotonic() > deadline:
                    os.killpg(pid, signal.SIGKILL)
                    status, timed_out = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), True
                else:
                    time.sleep(0.01)
            answer = {"rc": status, "timed_out": timed_out, "stdout": Path(out).read_text(errors="replace"),
                      "stderr": Path(err).read_text(errors="replace")}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
