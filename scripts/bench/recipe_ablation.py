#!/usr/bin/env python
"""What each change to the training recipe gives: the default run and the default with one change,
each trained for the same wall-clock budget on Multi30k de-en, one after the other (a timed run
needs the machine to itself), then scored on test_2016_flickr greedily and with beam 5. Writes
`{out}/{minutes}min/table.md` and `.csv` (change, overrides, steps, tokens/s, best validation BLEU,
test BLEU greedy and beam 5); docs/performance.md quotes the tables of 15 and 60 minutes.

    python scripts/bench/recipe_ablation.py --minutes 15                   # every change: about 17 min each
    python scripts/bench/recipe_ablation.py --minutes 60 --only default sampling
    python scripts/bench/recipe_ablation.py --minutes 15 --report-only     # the table of the finished runs

A finished run (its `metrics.json` and beam-5 report exist) is not trained again; an interrupted
one is started afresh, so that its minutes are one uninterrupted run's.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from nmt.system.runtime import cpu_model

ROOT = Path(__file__).resolve().parents[2]


def dropout(p: float, words: float = 0.0) -> list[str]:
    """Overrides that set the encoder's, the decoder's and the embeddings' dropout to p together, and
    the word dropout to `words` (the dropout entries below were measured without word dropout)."""
    return [f"model.encoder.dropout={p}", f"model.decoder.dropout={p}", f"model.embedding_dropout={p}", f"model.word_dropout={words}"]


# name -> (overrides of the default run, what it changes)
CHANGES: dict[str, tuple[list[str], str]] = {
    "default": ([], "the default recipe"),
    "sampling": (["data.sampling_alpha=0.1", "data.sampling_nbest=64"], "subword sampling, alpha 0.1 over the 64 best"),
    "sampling_all": (["data.sampling_alpha=0.5", "data.sampling_nbest=-1"], "subword sampling, alpha 0.5 over all segmentations"),
    "sampling_0.3": (["data.sampling_alpha=0.3", "data.sampling_nbest=64"], "subword sampling, alpha 0.3 over the 64 best"),
    "no_word_dropout": (dropout(0.4), "element dropout 0.4, no word dropout (the default until 2026-12-05)"),
    "word_dropout_0.1": (dropout(0.4, words=0.1), "word dropout 0.1 (whole source and decoder-input tokens), element dropout 0.4"),
    "word_dropout_0.2": (dropout(0.4, words=0.2), "word dropout 0.2, element dropout 0.4"),
    "select": (["train.select_at_end=true"], "best.pt chosen at the end by beam-5 validation (best or last weights)"),
    "average": (["train.select_at_end=true", "train.keep_checkpoints=4"], "as select, with the average of the last 4 checkpoints"),
    "ema": (["train.ema_decay=0.999", "train.select_at_end=true"], "moving average of the weights (0.999), selected as select"),
    "dropout_0.2": (dropout(0.2), "dropout 0.2"),
    "dropout_0.3": (dropout(0.3), "dropout 0.3 without word dropout (the default until 2026-12-03)"),
    "dropout_0.5": (dropout(0.5), "dropout 0.5"),
    "smoothing_0.2": (["train.label_smoothing=0.2"], "label smoothing 0.2"),
    "batch_2000": (["data.batch_tokens=2000", "train.lr=3e-3"], "batches of 2,000 tokens, peak rate 3e-3"),
    "bf16": (["train.precision=bf16"], "bf16 autocast on the CPU"),
    "valid_800": (["train.valid_every=800"], "validation every 800 steps instead of 400"),
}
FIELDS = ["change", "overrides", "steps", "tokens_per_s", "valid_bleu", "test_greedy", "test_beam5", "machine"]


def finished_run(folder: Path) -> bool:
    return (folder / "metrics.json").is_file() and (folder / "checkpoints" / "best.test_2016_flickr.json").is_file()


def run(name: str, minutes: float, folder: Path) -> str:
    """Train and score one change into `folder`; -> a line for the log."""
    if finished_run(folder):
        return f"{name}: done already"
    if folder.exists():
        shutil.rmtree(folder)
    overrides = CHANGES[name][0]
    train = [sys.executable, "-m", "nmt.train", *overrides, f"train.max_minutes={minutes:g}", "train.progress=false",
             f"hydra.run.dir={folder}"]
    for cmd in (train, [sys.executable, "-m", "nmt.evaluate", f"ckpt={folder / 'checkpoints' / 'best.pt'}", "split=test",
                        "decode.beam_size=5"]):
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            (folder / "ablation.log").write_text(proc.stdout + proc.stderr)
            return f"{name}: failed ({proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode})"
    (folder / "machine.txt").write_text(cpu_model() + "\n")
    return f"{name}: ok"


def row(name: str, folder: Path) -> dict[str, Any]:
    metrics = json.loads((folder / "metrics.json").read_text())
    beam = json.loads((folder / "checkpoints" / "best.test_2016_flickr.json").read_text())
    machine = (folder / "machine.txt").read_text().strip() if (folder / "machine.txt").is_file() else "not recorded"
    return {"change": name, "overrides": " ".join(CHANGES[name][0]) or "-", "steps": metrics["steps"],
            "tokens_per_s": metrics["tokens_per_s"], "valid_bleu": round(metrics["valid"]["bleu"], 2),
            "test_greedy": round(metrics["test"]["bleu"], 2), "test_beam5": round(beam["bleu"], 2), "machine": machine}


def write_table(rows: list[dict[str, Any]], folder: Path, minutes: float) -> str:
    base = next((r for r in rows if r["change"] == "default"), None)
    lines = [f"| change ({minutes:g} minutes) | overrides | steps | tokens/s | best valid BLEU | test greedy | test beam 5 "
             "| beam 5 vs default | machine |", "|" + "---|" * 9]
    for r in rows:
        delta = f"{r['test_beam5'] - base['test_beam5']:+.2f}" if base and r is not base else ""
        lines.append(f"| {r['change']} | `{r['overrides']}` | {r['steps']:,} | {r['tokens_per_s']:,.0f} | {r['valid_bleu']:.2f} | "
                     f"{r['test_greedy']:.2f} | {r['test_beam5']:.2f} | {delta} | {r['machine']} |")
    table = "\n".join(lines) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "table.md").write_text(table)
    with open(folder / "table.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=15)
    parser.add_argument("--only", nargs="+", metavar="CHANGE", help=f"these changes only: {', '.join(CHANGES)}")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "recipe")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    unknown = sorted(set(args.only or []) - set(CHANGES))
    if unknown:
        parser.error(f"unknown change(s) {', '.join(unknown)}; known: {', '.join(CHANGES)}")
    folder = args.out / f"{args.minutes:g}min"
    names = [n for n in CHANGES if n in (args.only or CHANGES)]
    if not args.report_only:
        for name in names:
            print(run(name, args.minutes, folder / name), flush=True)
    finished = [n for n in CHANGES if finished_run(folder / n)]
    print(write_table([row(n, folder / n) for n in finished], folder, args.minutes), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
