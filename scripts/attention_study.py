#!/usr/bin/env python
"""The attention study on Multi30k de-en: every score x mode (with the hard and local sub-variants)
trained at the same step budget, plus guided alignment and two-direction agreement for the default
model; written to docs/attention_multi30k.md with one figure and a CSV.

    python scripts/attention_study.py                 # everything (27 runs): about 3 hours on 2 cores
    python scripts/attention_study.py --only additive-soft reverse-en-de   # some runs, then the page
    python scripts/attention_study.py --steps 600 --parallel 1 --out study/short
    python scripts/attention_study.py --report-only   # rewrite the page from finished runs

Each run is `python -m nmt.train` in `{out}/{name}` with `train.max_steps` (a step budget, so that
two runs sharing the machine still get the same training), one validation at the end, and the
test at the end: greedy BLEU and chrF on test_2016_flickr, and the attention read as forced word
alignment of the test set, scored against eflomal's grow-diag-final-and links (`make aligner`;
agreement with a statistical aligner, not gold accuracy) beside the diagonal baseline. Every run's
hyper-parameters and final metrics also go to TensorBoard's HParams dashboard (every training
writes them, `nmt.training.metrics.write_hparams`): `tensorboard --logdir {shown}`.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from omegaconf import OmegaConf

from nmt.alignment.explorer_page import explorer_data, write_explorer
from nmt.system.runtime import cpu_model

ROOT = Path(__file__).resolve().parents[1]
SCORES = ["dot", "general", "additive", "location", "scaled_dot"]
MODES = ["soft", "hard_gumbel", "hard_reinforce", "local_m", "local_p"]  # presets of configs/model/attention
MODE_ORDER = ["soft", "local_m", "hard_gumbel", "local_p", "hard_reinforce"]  # the order the study trains them in
DEFAULT = "additive-soft"
SENTENCE = 0  # the test sentence of the figure
EXPLORER_SENTENCES = 40  # test sentences in the explorer page of every variant (its size grows with them)
EXPLORER = "attention_multi30k_explorer.html"
FIELDS = ["run", "status", "score", "mode", "variant", "steps", "minutes", "threads", "machine", "bleu", "chrf", "entropy", "tau", "aer",
          "diagonal_aer", "skipped_steps"]


def runs(guide_weights: list[float]) -> dict[str, list[str]]:
    """Run name -> its overrides."""
    grid = {f"{s}-{m}": [f"model/attention={m}", f"model.attention.score={s}"] for s, m in itertools.product(SCORES, MODES)}
    for weight in guide_weights:
        grid[f"additive-soft-guided-{weight:g}"] = [f"train.guided_alignment.weight={weight:g}"]
    grid["reverse-en-de"] = ["data=multi30k_en_de"]  # the default model, trained the other way
    # Luong et al.'s own local-p: the general score with the current state as query (input feeding), not s_{i-1}
    grid["luong_local_p"] = ["model/attention=luong_local_p"]
    return grid


def run_order(names: list[str]) -> list[str]:
    """The runs that answer the study's main questions first (the default, Luong's predictive local attention
    with the general score, the default's remedies), then the grid mode by mode, soft first and REINFORCE
    last, so that a study stopped part-way has its most telling rows."""
    first = [DEFAULT, "general-local_p", "luong_local_p", "reverse-en-de", *(n for n in names if n.startswith(f"{DEFAULT}-guided"))]
    grid = sorted((n for n in names if n not in first and n.count("-") == 1),
                  key=lambda n: (MODE_ORDER.index(n.split("-")[1]), SCORES.index(n.split("-")[0])))
    return first + grid + [n for n in names if n not in first and n not in grid]


def train(name: str, overrides: list[str], steps: int, threads: int, out: Path) -> str:
    run_dir = out / name
    if (run_dir / "metrics.json").is_file():
        return f"{name}: done already"
    if run_dir.exists():  # an interrupted run: start it again, so that its minutes mean one uninterrupted run
        shutil.rmtree(run_dir)
    cmd = [sys.executable, "-m", "nmt.train", *overrides, f"train.max_steps={steps}", f"train.valid_every={steps}", "train.max_minutes=0",
           f"train.threads={threads}", "train.progress=false", f"hydra.run.dir={run_dir}"]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    (run_dir / "study.log").parent.mkdir(parents=True, exist_ok=True)
    (run_dir / "study.log").write_text(proc.stdout + proc.stderr)
    (run_dir / "machine.txt").write_text(cpu_model() + "\n")  # its minutes are this CPU's
    last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
    status = "ok" if proc.returncode == 0 else f"failed ({last})"
    return f"{name}: {status} in {(time.monotonic() - start) / 60:.1f} min"


def machine(run_dir: Path) -> str:
    """The CPU a run trained on (its minutes depend on it), as the study recorded it."""
    path = run_dir / "machine.txt"
    return path.read_text().strip() if path.is_file() else "not recorded"


def symmetrised(out: Path) -> dict[str, Any]:
    """Two-direction agreement of the default model: its links and the en-de model's, each alone and
    combined (one `nmt.align ... align.reverse_ckpt=...`, whose scores.json holds every method) ->
    {"methods": {name: precision, recall, aer}, "best": name}, or {} while a run is missing."""
    if not all((out / name / "checkpoints" / "best.pt").is_file() for name in (DEFAULT, "reverse-en-de")):
        return {}  # the page says these runs are still missing
    target = out / "agreement"
    if not (target / "scores.json").is_file():
        subprocess.run([sys.executable, "-m", "nmt.align", f"ckpt={out / DEFAULT / 'checkpoints' / 'best.pt'}", "split=test",
                        f"align.reverse_ckpt={out / 'reverse-en-de' / 'checkpoints' / 'best.pt'}", f"align.out={target}",
                        "align.heatmaps=0"], cwd=ROOT, check=True, capture_output=True)
    scores = json.loads((target / "scores.json").read_text())
    return {"methods": scores["methods"], "best": scores["best"]}


def collect(out: Path, names: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for name in names:
        path = out / name / "metrics.json"
        if not path.is_file():
            rows.append({"run": name, "status": "failed" if (out / name / "study.log").is_file() else "not run yet"})
            continue
        m = json.loads(path.read_text())
        test, valid = m.get("test", {}), m["valid"]
        threads = OmegaConf.load(out / name / ".hydra" / "config.yaml").train.threads  # minutes depend on it
        rows.append({"run": name, "score": m["score"], "mode": m["mode"], "variant": m["variant"], "status": "ok",
                     "steps": m["steps"], "minutes": m["minutes"], "threads": threads, "machine": machine(out / name),
                     "bleu": test.get("bleu"), "chrf": test.get("chrf"),
                     "entropy": valid.get("attention_entropy"), "tau": test.get("kendall_tau"),
                     "aer": test.get("aer"), "diagonal_aer": test.get("diagonal_aer"), "skipped_steps": m["skipped_steps"]})
    return rows


def figure(out: Path, names: list[str], path: Path) -> None:
    """The same test sentence's attention (forced, subword level) under every variant."""
    cells = [n for n in names if (out / n / "align-test" / "matrices.jsonl").is_file() and not n.startswith("reverse")]
    cols = len(MODES)
    rows = (len(cells) + cols - 1) // cols
    fig = Figure(figsize=(3.2 * cols, 3.0 * rows), dpi=90)
    for k, name in enumerate(cells):
        record = json.loads((out / name / "align-test" / "matrices.jsonl").read_text().splitlines()[SENTENCE])
        ax = fig.add_subplot(rows, cols, k + 1)
        ax.imshow(np.asarray(record["matrix"]), vmin=0, vmax=1, cmap="viridis", aspect="auto", interpolation="nearest")
        ax.set_title(name, fontsize=9)
        ax.set_xticks(range(len(record["src"])), labels=record["src"], rotation=90, fontsize=5)
        ax.set_yticks(range(len(record["tgt"])), labels=record["tgt"], fontsize=5)
    fig.tight_layout()
    fig.savefig(path)


def explorer(out: Path, names: list[str], path: Path) -> bool:
    """Every variant's attention on the first test sentences in one explorer page (nmt.explore) -> written?"""
    cells = [n for n in names if (out / n / "align-test" / "matrices.jsonl").is_file()]
    if not cells:
        return False
    data = explorer_data([out / n / "align-test" for n in cells], "The attention study on Multi30k: every variant, test_2016_flickr",
                         EXPLORER_SENTENCES, cells)
    write_explorer(path, data)
    return True


def fmt(value: Any, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def budget_sentence(ok: list[dict[str, Any]]) -> str:
    """How long the step budget took, on which machine(s), and what the default model reached with it."""
    if not ok:
        return "a step budget"
    minutes = float(np.median([r["minutes"] for r in ok]))
    threads = sorted({r["threads"] for r in ok})
    machines = sorted({r["machine"] for r in ok})
    where = (f"every row on one machine ({machines[0]}, 2 cores)" if len(machines) == 1
             else f"rows from {len(machines)} machines ({', '.join(machines)}: compare minutes within one)")
    default = next((r for r in ok if r["run"] == DEFAULT), None)
    reached = (f"; with it the default model (`{DEFAULT}`) reaches {fmt(default['bleu'])} test BLEU greedy, where 60 minutes "
               f"of training on both cores reach 39.17 ([results.md](results.md))" if default else "")
    sharing = "Two runs at a time, one core each" if threads == [1] else f"Runs with {'/'.join(map(str, threads))} threads"
    return (f"{sharing}: a median of {minutes:.1f} minutes of training per run, {where}. It is a step budget, so that "
            f"what a run learns does not depend on what shares the machine{reached}")


def write_page(out: Path, rows: list[dict[str, Any]], agreement: dict[str, Any], steps: int, docs: Path,
               explored: bool = False) -> None:
    ok = [r for r in rows if r["status"] == "ok" and not r["run"].startswith("reverse")]
    header = ("| run | score | mode | variant | BLEU | chrF | entropy | Kendall tau | AER vs eflomal | diagonal AER "
              "| minutes (threads) | CPU |")
    lines = [header, "|" + "---|" * 12]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['run']} | {r['status']} | | | | | | | | | | |")
            continue
        lines.append(f"| {r['run']} | {r['score']} | {r['mode']} | {r['variant']} | {fmt(r['bleu'])} | {fmt(r['chrf'])} | "
                     f"{fmt(r['entropy'])} | {fmt(r['tau'])} | {fmt(r['aer'], 3)} | {fmt(r['diagonal_aer'], 3)} | "
                     f"{fmt(r['minutes'], 1)} ({r['threads']}) | {r['machine']} |")
    best_aer = min(ok, key=lambda r: r["aer"])
    best_bleu = max(ok, key=lambda r: r["bleu"])
    below_diagonal = [r["run"] for r in ok if r["aer"] < r["diagonal_aer"]]
    methods = agreement.get("methods", {})
    agree = (", ".join(f"{name} AER {fmt(m['aer'], 3)} (precision {fmt(m['precision'], 3)}, recall {fmt(m['recall'], 3)})"
                       for name, m in methods.items()) + f"; the best: {agreement['best']}." if methods else "not run yet.")
    shown = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    explore_note = f"""
**Explore them:** [{EXPLORER}]({EXPLORER}) is one offline page (download it and open it in a browser) with
every variant's attention on the first {EXPLORER_SENTENCES} test sentences side by side, interactive: hover a
cell, switch the links, the aligner's links and the diagonal on and off, sort the sentences by where the
variants disagree (`python -m nmt.explore {shown}/*/align-test sentences={EXPLORER_SENTENCES}` makes the same).
""" if explored else ""
    missing = "" if all(r["status"] == "ok" for r in rows) else " (the command trains the missing ones and rewrites this page)"
    budget_note = budget_sentence(ok)
    text = f"""# Attention on Multi30k: how good an alignment is it?

Made by `python scripts/attention_study.py` (runs in `{shown}`; this page, `docs/attention_multi30k.csv` and
`docs/images/attention_multi30k.png` are its output). Every run is the default model (bi-GRU 256, GRU decoder
512, embeddings 256, joint sentencepiece 8k) with one attention variant, trained on Multi30k de-en for
**{steps:,} steps**, scored on test_2016_flickr:
greedy BLEU and chrF; the attention's mean row entropy (validation, nats); the monotonicity of its
alignment, Kendall's tau between target order and each target word's most-attended source word; and its
forced word alignment scored against eflomal's grow-diag-final-and links (`make aligner`; AER of
*agreement with a statistical aligner*, not against human gold), with the diagonal baseline (target
word j linked to source word floor((j + 1/2) |src| / |tgt|)) on the same sentences.

**The budget.** {budget_note}.

{len([r for r in rows if r["status"] == "ok"])} of {len(rows)} runs finished{missing}. Every run attends from the previous
decoder state s_{{i-1}} (Bahdanau's query) except `luong_local_p`, Luong et al.'s own local-p (`model/attention=luong_local_p`:
the general score, the current state s_i as query, the previous context fed to the cell).

{chr(10).join(lines)}

**Two directions agree** (the default model, `{DEFAULT}`, and the same model trained en-de,
`reverse-en-de`, each reading its attention as links; `nmt.align align.reverse_ckpt=...`):
{agree}

Lowest AER: `{best_aer['run']}` ({fmt(best_aer['aer'], 3)}); highest BLEU: `{best_bleu['run']}` ({fmt(best_bleu['bleu'])}).
Runs whose attention agrees with eflomal better than the diagonal line: {len(below_diagonal)} of {len(ok)}
({', '.join(f"`{name}`" for name in below_diagonal) or 'none'}).

![The same test sentence under every variant](images/attention_multi30k.png)

*Test sentence {SENTENCE + 1}, forced alignment (subword pieces; rows: the step that predicted each target
piece), every variant side by side.*
{explore_note}
TensorBoard's HParams dashboard holds the same runs and metrics: `tensorboard --logdir {shown}`.
"""
    (docs / "attention_multi30k.md").write_text(text)
    with open(docs / "attention_multi30k.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # 1,500 steps: what the default model trains in 15 minutes on one core while another run shares the machine.
    parser.add_argument("--steps", type=int, default=1500)
    # Two runs on one core each do 1.17-1.35x the work per minute of one run on both (docs/results.md, the ensemble).
    parser.add_argument("--parallel", type=int, default=2, help="runs at a time (each with 2 // parallel threads)")
    parser.add_argument("--guide-weights", type=float, nargs="+", default=[0.5])
    parser.add_argument("--out", type=Path, default=ROOT / "study" / "multi30k")
    parser.add_argument("--only", nargs="+", metavar="RUN", help="train only these runs (names as in the page), then write the page")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    plan = runs(args.guide_weights)
    unknown = sorted(set(args.only or []) - set(plan))
    if unknown:
        parser.error(f"unknown run(s) {', '.join(unknown)}; known: {', '.join(plan)}")
    if not args.report_only:
        subprocess.run([sys.executable, "-m", "nmt.reference_aligner"], cwd=ROOT, check=True)
        threads = max(1, 2 // args.parallel)
        todo = [name for name in run_order(list(plan)) if name in (args.only or plan)]
        with ThreadPoolExecutor(args.parallel) as pool:
            for line in pool.map(lambda name: train(name, plan[name], args.steps, threads, args.out), todo):
                print(line, flush=True)
    rows = collect(args.out, list(plan))
    agreement = symmetrised(args.out)
    docs = ROOT / "docs"
    figure(args.out, list(plan), docs / "images" / "attention_multi30k.png")
    explored = explorer(args.out, [n for n in plan if not n.startswith("reverse")], docs / EXPLORER)
    write_page(args.out, rows, agreement, args.steps, docs, explored)
    print(f"wrote {docs / 'attention_multi30k.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
