#!/usr/bin/env python
"""Gather every job's metrics.json under DIR (a Hydra multirun folder) into one table.

    python scripts/sweep_table.py multirun/2026-11-30/10-00-00 [--md out.md] [--csv out.csv]

Prints Markdown; writes Markdown and/or CSV when asked. One row per job, none hidden: a job that
failed before writing metrics.json appears with its folder and "no metrics.json".
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path
from typing import Any

COLUMNS = [
    ("data", lambda m: m.get("data", "")),
    ("score", lambda m: m.get("score", "")),
    ("mode", lambda m: m.get("mode", "") + (f" ({m['variant']})" if m.get("variant") else "")),
    ("test exact match", lambda m: _fmt(m.get("test", {}).get("exact_match"), 3)),
    ("test BLEU", lambda m: _fmt(m.get("test", {}).get("bleu"), 2)),
    ("AER", lambda m: _fmt(m.get("test", {}).get("aer", m.get("valid", {}).get("aer")), 3)),
    ("valid exact match", lambda m: _fmt(m.get("valid", {}).get("exact_match"), 3)),
    ("steps", lambda m: m.get("steps", "")),
    ("minutes", lambda m: _fmt(m.get("minutes"), 2)),
    ("tokens/s", lambda m: _fmt(m.get("tokens_per_s"), 0)),
    ("parameters", lambda m: m.get("parameters", "")),
    ("stopped because", lambda m: m.get("stop", "")),
]


def _fmt(value: Any, digits: int) -> str:
    return "" if value is None else f"{float(value):.{digits}f}"


def collect(root: Path) -> list[dict[str, str]]:
    """One row per job folder (a folder holding .hydra/ or metrics.json) under root."""
    found = {p.parent for p in root.rglob("metrics.json")} | {p.parent for p in root.rglob(".hydra")}
    found = {p for p in found if not (p.name.startswith("model") and p.parent in found)}  # an ensemble's models: part of its job
    # natural order: job 2 before job 10
    jobs = sorted(found, key=lambda p: [int(part) if part.isdigit() else part for part in p.relative_to(root).parts])
    rows = []
    for job in jobs:
        path = job / "metrics.json"
        if path.is_file():
            metrics = json.loads(path.read_text())
            row = {name: str(get(metrics)) for name, get in COLUMNS}
        else:
            row = {name: "" for name, _ in COLUMNS}
            row["stopped because"] = f"no metrics.json ({job.relative_to(root)})"
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, str]]) -> str:
    names = [name for name, _ in COLUMNS]
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(row[n] for n in names) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def to_csv(rows: list[dict[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[name for name, _ in COLUMNS])
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir", type=Path, help="a multirun folder (or any folder of runs)")
    parser.add_argument("--md", type=Path, help="write the Markdown table here")
    parser.add_argument("--csv", type=Path, help="write a CSV table here")
    args = parser.parse_args()
    if not args.dir.is_dir():
        parser.error(f"{args.dir}: not a folder")
    rows = collect(args.dir)
    if not rows:
        parser.error(f"{args.dir}: no runs found (no metrics.json or .hydra/ below it)")
    table = markdown(rows)
    print(table, end="")
    if args.md:
        args.md.write_text(table)
    if args.csv:
        args.csv.write_text(to_csv(rows))


if __name__ == "__main__":
    main()
