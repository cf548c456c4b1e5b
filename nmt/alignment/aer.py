"""Alignment error rate (Och & Ney 2003) with precision and recall, over a corpus.

A = predicted links, S = sure gold links, P = possible gold links including the sure ones:
precision = |A & P| / |A|, recall = |A & S| / |S|, AER = 1 - (|A & S| + |A & P|) / (|A| + |S|).
"""

from __future__ import annotations

from dataclasses import dataclass

from nmt.alignment.pharaoh import Link


@dataclass
class AlignmentScores:
    precision: float
    recall: float
    aer: float
    sentences: int


def alignment_error_rate(
    predicted: list[list[Link]] | list[set[Link]], gold: list[tuple[set[Link], set[Link]]]
) -> AlignmentScores:
    """Corpus-level precision, recall and AER of predicted links against (sure, possible) gold."""
    if len(predicted) != len(gold):
        raise ValueError(f"{len(predicted)} predicted alignments but {len(gold)} gold ones")
    a_total = s_total = a_and_s = a_and_p = 0
    for links, (sure, possible) in zip(predicted, gold):
        a = set(links)
        p = sure | possible
        a_total += len(a)
        s_total += len(sure)
        a_and_s += len(a & sure)
        a_and_p += len(a & p)
    precision = a_and_p / a_total if a_total else 0.0
    recall = a_and_s / s_total if s_total else 0.0
    denominator = a_total + s_total
    aer = 1.0 - (a_and_s + a_and_p) / denominator if denominator else 0.0
    return AlignmentScores(precision, recall, aer, len(gold))
