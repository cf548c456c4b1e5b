"""The translate command: one line out per line in, files and pipes, n-best format, streaming."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import ROOT, Result, cli


def translate(ckpt: Path, args: list[str], stdin: str = "") -> Result:
    return cli("nmt.translate", [f"ckpt={ckpt}", *args], input=stdin)


def test_line_alignment_with_empty_and_very_long_lines(trained_toy: Path, tmp_path: Path) -> None:
    ckpt = trained_toy / "checkpoints" / "best.pt"
    long_line = " ".join(["w1", "w2", "w3"] * 40)  # 120 tokens: over the 64-token training limit
    lines = ["w1 w2 w3 w4", "", "w5 w6 w7", long_line, "", "w9 w8"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    proc = translate(ckpt, [f"input={tmp_path / 'in.txt'}", f"output={tmp_path / 'out.txt'}", "decode.lines_per_batch=4"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = (tmp_path / "out.txt").read_text().split("\n")
    assert len(out) == len(lines) + 1 and out[-1] == ""
    assert out[0] == "w4 w3 w2 w1" and out[1] == "" and out[2] == "w7 w6 w5" and out[4] == "" and out[5] == "w8 w9"
    assert out[3].strip() != ""
    assert "warning: line 4: 121 source tokens, truncated to 64" in proc.stderr


def test_stdin_to_stdout_with_alignments_and_greedy(trained_toy: Path) -> None:
    ckpt = trained_toy / "checkpoints" / "best.pt"
    proc = translate(ckpt, ["decode.show_alignment=true", "decode.beam_size=1"], stdin="w1 w2 w3\n\nw4 w5\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n") == ["w3 w2 w1\t2-0 1-1 0-2", "", "w5 w4\t1-0 0-1", ""]


def test_n_best_format(trained_toy: Path) -> None:
    ckpt = trained_toy / "checkpoints" / "best.pt"
    proc = translate(ckpt, ["decode.n_best=3", "decode.beam_size=4"], stdin="w1 w2 w3\n\nw4 w5\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line.split(" ||| ") for line in proc.stdout.splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "0", "1", "1", "1", "2", "2", "2"]
    assert rows[0][1] == "w3 w2 w1" and rows[6][1] == "w5 w4" and rows[3][1] == ""
    scores = [float(r[2]) for r in rows[:3]]
    assert scores == sorted(scores, reverse=True)
    bad = translate(ckpt, ["decode.n_best=5", "decode.beam_size=2"], stdin="w1\n")
    assert bad.returncode == 2 and "decode.n_best=5 cannot exceed decode.beam_size=2" in bad.stderr


def test_streams_before_the_input_ends(trained_toy: Path) -> None:
    ckpt = trained_toy / "checkpoints" / "best.pt"
    proc = subprocess.Popen([sys.executable, "-m", "nmt.translate", f"ckpt={ckpt}", "decode.lines_per_batch=1"],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("w1 w2\n")
    proc.stdin.flush()
    first = proc.stdout.readline()  # arrives while stdin is still open
    proc.stdin.write("w3 w4\n")
    proc.stdin.close()
    rest = proc.stdout.read()
    assert proc.wait(timeout=120) == 0
    assert first == "w2 w1\n" and rest == "w4 w3\n"
