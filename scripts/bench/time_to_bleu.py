#!/usr/bin/env python
"""Train nmt, JoeyNMT 2.3.0 and OpenNMT-py 3.5.1 for the same wall-clock budget on Multi30k de-en
(the same model sizes, the same batches: nmt's default of `data.batch_tokens` tokens; Adam at PEER_LR for
the peers, at nmt's own peak rate `train.lr` for nmt; the full validation set every `--valid-minutes` of each system's training), one after
the other on this machine, and plot validation BLEU against minutes (`scripts/bench/plot_time_to_bleu.py`).
nmt runs its default recipe, which decays the rate to the end of the budget (`train.schedule=cosine`);
the peers keep the rate constant: JoeyNMT's plateau scheduler breaks on torch 2.13, and neither
peer has a schedule that ends with a wall-clock budget. The peers' virtual environments are the
ones `scripts/bench/bench_peers.sh` installs; run this through `bash scripts/bench/time_to_bleu.sh`.

    bash scripts/bench/time_to_bleu.sh [--minutes 20]     # about 3 x 20 minutes, nothing else running
    bash scripts/bench/time_to_bleu.sh --systems joeynmt  # train one again, plot with the others' logs
    bash scripts/bench/time_to_bleu.sh --systems nmt model.attention.attend_from=current  # nmt with overrides,
        # into --work/nmt+model.attention.attend_from-current, beside the default's --work/nmt
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from bench_peers import joey_config, onmt_config

from nmt.config.schema import DataConfig
from nmt.data.corpus import split_files
from nmt.data.prepare import prepare

ROOT = Path(__file__).resolve().parents[2]
# About one training step of each system on 1,000-token batches on a 2-core machine (measured from the
# first minutes of each one's log; JoeyNMT's steps hold fewer tokens than its batch_size says), so that
# each validates about every --valid-minutes of its own training. nmt's: 0.22 s in its default run of
# 2026-12-04 (an Intel Xeon, fp32); the 0.4 s it was given before made it validate twice as often as
# the peers, each validation time taken from its budget.
STEP_SECONDS = {"nmt": 0.22, "joeynmt": 0.7, "onmt": 0.8}
# The peers' constant rate, fixed here rather than taken from nmt's `train.lr`: a rate chosen for nmt's
# decaying schedule is not one for their constant one. At 3e-3 JoeyNMT fell to 9.3 BLEU in 15 minutes
# (2026-12-07, docs/results.md); their curves were all measured at 2e-3.
PEER_LR = 2e-3
PEER_SETUP_SECONDS = 60  # the peers are stopped from outside: a minute for loading the data before their first step


def timed(cmd: list[str], seconds: float, log: Path, env: dict[str, str] | None = None) -> None:
    """Run `cmd` for at most `seconds` (then stop it), its output into `log`."""
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(timeout=60)


def nmt_run_name(overrides: list[str]) -> str:
    """The folder in --work of nmt's run: `nmt` for the default recipe, `nmt+key-value+...` with
    overrides, so that a run with overrides never replaces the default's (nor another's)."""
    return "+".join(["nmt", *(re.sub(r"[^A-Za-z0-9._-]", "_", o.replace("=", "-")) for o in overrides)])


def nmt_command(work: Path, minutes: float, valid_steps: int, overrides: list[str]) -> list[str]:
    """nmt's training for the race: its default recipe with the race's budget and validations, then
    `overrides` (Hydra key=value; last, so that they win), into `work / nmt_run_name(overrides)`."""
    return [sys.executable, "-m", "nmt.train", f"hydra.run.dir={work / nmt_run_name(overrides)}",
            f"train.max_minutes={minutes}", f"train.valid_every={valid_steps}", "train.test_at_end=false",
            "train.progress=false", "train.early_stopping_patience=100", *overrides]


def run_nmt(work: Path, minutes: float, valid_steps: int, overrides: list[str]) -> None:
    name = nmt_run_name(overrides)
    shutil.rmtree(work / name, ignore_errors=True)
    timed(nmt_command(work, minutes, valid_steps, overrides), minutes * 60 + 600, work / f"{name}.log")


def run_joeynmt(work: Path, minutes: float, valid_steps: int, python: str) -> None:
    spm_model, vocab = work / "spm.model", work / "vocab.txt"
    joey = joey_config(work, spm_model, vocab, work / "joey", 10**6, 1)
    joey["data"]["dev"] = str(work / "dev20")
    logging = joey["training"]["logging_freq"]  # JoeyNMT wants validation_freq a multiple of it
    joey["training"].update(batch_type="token", batch_size=DataConfig().batch_tokens, learning_rate=PEER_LR,
                            early_stopping_metric="bleu", validation_freq=max(1, round(valid_steps / logging)) * logging)
    (work / "joey.yaml").write_text(yaml.safe_dump(joey))
    timed([python, "-m", "joeynmt", "train", str(work / "joey.yaml")], minutes * 60 + PEER_SETUP_SECONDS, work / "joey.out")


def run_onmt(work: Path, minutes: float, valid_steps: int, bin_dir: Path) -> None:
    onmt = onmt_config(work, work / "spm.model", work / "onmt_model", 10**6)
    onmt.update(batch_type="tokens", batch_size=DataConfig().batch_tokens, learning_rate=PEER_LR, valid_steps=valid_steps,
                valid_metrics=["BLEU"])  # its training log, validations included, is its output (onmt.out)
    (work / "onmt.yaml").write_text(yaml.safe_dump(onmt))
    env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")
    subprocess.run([str(bin_dir / "onmt_build_vocab"), "-config", str(work / "onmt.yaml"), "-n_sample", "-1"], cwd=ROOT,
                   check=True, capture_output=True, env=env)
    timed([str(bin_dir / "onmt_train"), "-config", str(work / "onmt.yaml")], minutes * 60 + PEER_SETUP_SECONDS, work / "onmt.out", env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--joeynmt-python", required=True)
    parser.add_argument("--onmt-bin", required=True, type=Path)
    parser.add_argument("--minutes", type=float, default=20)
    parser.add_argument("--valid-minutes", type=float, default=2.5)
    parser.add_argument("--systems", default=",".join(STEP_SECONDS),
                        help="which to train (again), comma-separated; the others' logs in --work are plotted as they are")
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "time_to_bleu")
    parser.add_argument("--output", type=Path, help="the picture (default: docs/images/time_to_bleu.png; with "
                        "overrides, time_to_bleu_<nmt's run folder>.png in --work)")
    parser.add_argument("overrides", nargs="*",
                        help="nmt.train overrides (key=value) for nmt's run, e.g. model.attention.attend_from=current")
    args = parser.parse_args()
    systems = args.systems.split(",")
    if unknown := set(systems) - set(STEP_SECONDS):
        parser.error(f"--systems: unknown {sorted(unknown)}; choose from {list(STEP_SECONDS)}")
    if args.overrides and "nmt" not in systems:
        parser.error(f"overrides {args.overrides} are for nmt's run, and --systems does not train nmt")
    work = args.work
    nmt_run = nmt_run_name(args.overrides)
    output = args.output or (work / f"time_to_bleu_{nmt_run}.png" if args.overrides else ROOT / "docs" / "images" / "time_to_bleu.png")
    work.mkdir(parents=True, exist_ok=True)
    data = prepare(DataConfig())
    (work / "spm.model").write_bytes(data.tgt_tokenizer.model_proto)
    specials = {"<pad>", "<unk>", "<s>", "</s>"}
    pieces = data.tgt_tokenizer.pieces(range(len(data.tgt_tokenizer)))
    (work / "vocab.txt").write_text("".join(p + "\n" for p in pieces if p not in specials))
    for lang in ("de", "en"):  # onmt_config's validation file names; here the whole validation set
        shutil.copy(split_files(DataConfig(), "valid")[0].with_suffix(f".{lang}"), work / f"dev20.{lang}")
    valid_steps = {name: max(1, int(args.valid_minutes * 60 / step)) for name, step in STEP_SECONDS.items()}

    if "nmt" in systems:
        run_nmt(work, args.minutes, valid_steps["nmt"], args.overrides)
    if "joeynmt" in systems:
        run_joeynmt(work, args.minutes, valid_steps["joeynmt"], args.joeynmt_python)
    if "onmt" in systems:
        run_onmt(work, args.minutes, valid_steps["onmt"], args.onmt_bin)

    subprocess.run([sys.executable, "scripts/bench/plot_time_to_bleu.py", "--nmt", str(work / nmt_run), "--joeynmt", str(work / "joey"),
                    "--onmt", str(work / "onmt.out"), "--output", str(output),
                    "--title", f"Multi30k de-en, validation BLEU vs minutes, 2 CPU cores ({args.minutes:g} min each)"
                    + (f"\nnmt: {' '.join(args.overrides)}" if args.overrides else "")],
                   cwd=ROOT, check=True)


if __name__ == "__main__":
    main()
