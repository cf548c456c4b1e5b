"""Scores of word alignments: alignment error rate (Och & Ney 2003) with precision and recall over
a corpus, and monotonicity (Kendall's tau of the linked source positions in target order).

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


def kendall_tau(positions: list[int] | list[float]) -> float | None:
    """Kendall's tau-b between the order of target words and `positions`, the source word each one
    is linked to: 1 = strictly monotonic, -1 = reversed; None when undefined (fewer than two
    words, or every word on one source position)."""
    n = len(positions)
    concordant = discordant = ties = 0
    for a in range(n):
        for b in range(a + 1, n):
            d = positions[b] - positions[a]
            concordant, discordant, ties = concordant + (d > 0), discordant + (d < 0), ties + (d == 0)
    pairs = n * (n - 1) // 2
    denominator = (pairs * (pairs - ties)) ** 0.5
    return (concordant - discordant) / denominator if denominator else None


def monotonicity(links: list[list[Link]]) -> float | None:
    """Mean Kendall tau over sentences of the links' source positions in target order (each target
    word's first link), over the sentences where it is defined."""
    taus = []
    for sentence in links:
        first: dict[int, int] = {}
        for i, j in sorted(sentence, key=lambda link: (link[1], link[0])):
            first.setdefault(j, i)
        tau = kendall_tau([first[j] for j in sorted(first)])
        if tau is not None:
            taus.append(tau)
    return sum(taus) / len(taus) if taus else None
