"""Measure the ways of reading hard links from the same attention (nmt.alignment.words.LinkRule).

    python scripts/link_rules.py EXPORT REFERENCE [--markdown]

EXPORT is an `nmt.align` output folder (its matrices.jsonl holds the subword attention of every
sentence pair); REFERENCE a Pharaoh file of the same pairs (gold, or an aligner's links: then the
numbers are agreement, not accuracy). Prints precision, recall and AER of every rule: the merge of
a source word's pieces (sum, mean, max), the step a link is read from (shift 0, 1, 2: Shift-Att),
thresholds added to the argmax, and links for the source words the argmax leaves out. No model
runs: every rule reads the exported matrices.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from nmt.alignment.aer import alignment_error_rate
from nmt.alignment.pharaoh import read_pharaoh
from nmt.alignment.words import LinkRule, SentenceAlignment

RULES = [
    LinkRule(),
    LinkRule(merge="mean"),
    LinkRule(merge="max"),
    LinkRule(shift=1),
    LinkRule(shift=2),
    LinkRule(threshold=0.5),
    LinkRule(threshold=0.3),
    LinkRule(threshold=0.2),
    LinkRule(cover_source=True),
    LinkRule(threshold=0.3, cover_source=True),
]


def read_export(folder: Path) -> list[SentenceAlignment]:
    """The subword alignments an `nmt.align` export wrote (matrices.jsonl)."""
    out = []
    with open(folder / "matrices.jsonl", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            out.append(SentenceAlignment(record["src"], record["tgt"], np.asarray(record["matrix"], dtype=np.float32)))
    return out


def describe(rule: LinkRule) -> str:
    """The `align.*` overrides that choose a rule ("default" for the default)."""
    default = LinkRule()
    parts = [f"align.{name}={getattr(rule, name)}" for name in ("merge", "shift", "threshold", "cover_source")
             if getattr(rule, name) != getattr(default, name)]
    return " ".join(parts) or "default (sum, shift 0, argmax)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("reference", type=Path)
    args = parser.parse_args()
    alignments, reference = read_export(args.export), read_pharaoh(args.reference)
    print(f"{len(alignments)} sentence pairs of {args.export}, against {args.reference}\n")
    print("| rule | precision | recall | AER |\n|---|---|---|---|")
    for rule in RULES:
        scores = alignment_error_rate([rule.links(a) for a in alignments], reference)
        print(f"| {describe(rule)} | {scores.precision:.3f} | {scores.recall:.3f} | {scores.aer:.3f} |")


if __name__ == "__main__":
    main()
