#!/usr/bin/env python
"""Validation BLEU against wall-clock minutes of training, for nmt, JoeyNMT and OpenNMT-py trained on
the same data, machine and budget (`scripts/bench/time_to_bleu.sh` runs them), from their own logs.

    python scripts/bench/plot_time_to_bleu.py --nmt RUN_DIR --joeynmt JOEY_MODEL_DIR --onmt ONMT_LOG --output docs/images/time_to_bleu.png

nmt: `valid/bleu` in the run's TensorBoard events (wall time of each validation, minus the first
training step's). JoeyNMT: its train.log's "Evaluation result (greedy) ... bleu: X" lines (their
timestamps, minus the first "Epoch" line's). OpenNMT-py: its log's "validation BLEU: X" lines
(`valid_metrics: [BLEU]`; timestamps, minus the first "Step" line's). Each system's BLEU is
sacrebleu's corpus BLEU of its detokenized validation translations; the minutes include each
system's own validation time. It also prints nmt's lead over each peer after `--lead-after` minutes:
at every validation of either system, the other's curve interpolated linearly there.
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import datetime
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

Curve = list[tuple[float, float]]  # (minutes, BLEU)
STAMP = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)"


def nmt_curve(run_dir: Path) -> Curve:
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    start = events.Scalars("train/loss")[0].wall_time
    return [((e.wall_time - start) / 60, e.value) for e in events.Scalars("valid/bleu")]


def log_curve(text: str, start_pattern: str, bleu_pattern: str) -> Curve:
    """(minutes since the first line matching `start_pattern`, BLEU) of each line matching `bleu_pattern`."""
    start, curve = None, []
    for line in text.splitlines():
        stamp = re.search(STAMP, line)
        if stamp is None:
            continue
        when = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S")
        if start is None and re.search(start_pattern, line):
            start = when
        found = re.search(bleu_pattern, line)
        if found and start is not None:
            curve.append(((when - start).total_seconds() / 60, float(found.group(1))))
    return curve


def interpolate(curve: Curve, minute: float) -> float | None:
    """BLEU of `curve` at `minute`, linear between its validations; None outside its first..last validation."""
    if not curve or not curve[0][0] <= minute <= curve[-1][0]:
        return None
    return float(np.interp(minute, [m for m, _ in curve], [b for _, b in curve]))


def leads(ours: Curve, theirs: Curve, after: float) -> list[tuple[float, float]]:
    """(minute, our BLEU minus theirs) at every validation of either curve later than `after` minutes,
    the other curve interpolated linearly there; a minute outside either curve's span is left out
    (neither system had validated yet, or one had stopped)."""
    minutes = sorted({m for m, _ in ours + theirs if m > after})
    pairs = ((m, interpolate(ours, m), interpolate(theirs, m)) for m in minutes)
    return [(m, a - b) for m, a, b in pairs if a is not None and b is not None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nmt", type=Path, required=True)
    parser.add_argument("--joeynmt", type=Path, required=True, help="JoeyNMT model_dir (its train.log)")
    parser.add_argument("--onmt", type=Path, required=True, help="OpenNMT-py training log")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--title", default="Multi30k de-en, 2 CPU cores")
    parser.add_argument("--lead-after", type=float, default=4.0,
                        help="report nmt's lead over each peer at every validation after this minute")
    args = parser.parse_args()
    curves = {
        "nmt": nmt_curve(args.nmt),
        "JoeyNMT 2.3.0": log_curve((args.joeynmt / "train.log").read_text(), r"Epoch\s+1", r"Evaluation result.*?bleu:\s*([\d.]+)"),
        "OpenNMT-py 3.5.1": log_curve(args.onmt.read_text(), r"Step\s+\d+/", r"validation BLEU:\s*([\d.]+)"),
    }
    fig = Figure(figsize=(6.4, 4.0), dpi=110)
    ax = fig.add_subplot()
    for name, curve in curves.items():
        ax.plot([m for m, _ in curve], [b for _, b in curve], marker="o", markersize=3, label=name)
    ax.set_xlabel("training time, minutes (validations included)")
    ax.set_ylabel("validation BLEU (greedy)")
    ax.set_title(args.title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output)
    args.output.with_suffix(".json").write_text(json.dumps(curves, indent=1) + "\n")
    for name, curve in curves.items():
        best = max(curve, key=lambda point: point[1]) if curve else (0.0, 0.0)
        print(f"{name}: {len(curve)} validations, best BLEU {best[1]:.2f} at {best[0]:.1f} min")
    for name, curve in curves.items():
        if name == "nmt" or not (points := leads(curves["nmt"], curve, args.lead_after)):
            continue
        low, high = min(points, key=lambda p: p[1]), max(points, key=lambda p: p[1])
        print(f"nmt - {name} after minute {args.lead_after:g}, at {len(points)} validations: lowest {low[1]:+.2f} "
              f"(minute {low[0]:.1f}), highest {high[1]:+.2f} (minute {high[0]:.1f})")


if __name__ == "__main__":
    main()
