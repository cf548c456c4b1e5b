"""Merge a subword attention matrix into a word matrix, using sentencepiece word boundaries; a
sentence pair's alignment (`SentenceAlignment`) and its hard word links (`LinkRule`).

A piece that starts with the sentencepiece space marker begins a new word. The weight of a source
word is by default the sum over its pieces (attention mass is additive over positions; `mean` and
`max` are the alternatives); the row of a target word is the mean of its pieces' rows (each row is
one distribution). Special tokens (EOS) belong to no word: their row/column is dropped, so word
rows may sum to less than 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from nmt.alignment.pharaoh import Link, hard_links

SPACE = "\u2581"  # sentencepiece's word-boundary marker


def word_groups(pieces: list[str]) -> list[list[int]]:
    """Indices of the pieces of each word. ["▁ein", "▁Hund", "e"] -> [[0], [1, 2]]."""
    groups: list[list[int]] = []
    for k, piece in enumerate(pieces):
        if piece.startswith(SPACE) or not groups:
            groups.append([k])
        else:
            groups[-1].append(k)
    return groups


def words_of(pieces: list[str]) -> list[str]:
    """The words that the pieces spell, without the boundary marker."""
    return ["".join(pieces[k] for k in group).replace(SPACE, "") for group in word_groups(pieces)]


# How the weights of a source word's pieces become the word's weight (`align.merge`).
SOURCE_MERGES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "sum": lambda columns: columns.sum(1), "mean": lambda columns: columns.mean(1), "max": lambda columns: columns.max(1),
}


def merge_to_words(matrix: np.ndarray, src_pieces: list[str], tgt_pieces: list[str], merge: str = "sum") -> np.ndarray:
    """matrix (T_y', T_x') over target rows x source columns, whose first len(tgt_pieces) rows and
    len(src_pieces) columns are the pieces (any further ones, e.g. EOS, are dropped)
    -> (target words, source words): source pieces merged by `merge` (sum, mean or max), target
    pieces averaged."""
    pieces = matrix[: len(tgt_pieces), : len(src_pieces)]
    src_groups, tgt_groups = word_groups(src_pieces), word_groups(tgt_pieces)
    combine = SOURCE_MERGES[merge]
    by_src = np.stack([combine(pieces[:, g]) for g in src_groups], 1) if src_groups else np.zeros((len(tgt_pieces), 0))
    rows = [by_src[g].mean(0) for g in tgt_groups]
    return np.stack(rows, 0) if rows else np.zeros((0, len(src_groups)))


EOS_PIECE = "</s>"


@dataclass
class SentenceAlignment:
    """matrix (len(tgt_pieces), len(src_pieces)): rows = target pieces then EOS, columns =
    source pieces then EOS; each row is the attention of the step that predicted that token."""

    src_pieces: list[str]
    tgt_pieces: list[str]
    matrix: np.ndarray

    def words(self, merge: str = "sum", shift: int = 0) -> tuple[list[str], list[str], np.ndarray]:
        """(source words, target words, word matrix (target words, source words)); EOS dropped.
        `shift` = k reads target piece t from the row of step t + k instead of the step that
        predicts it: a later step whose query has read the piece (Shift-Att, Chen et al. 2020;
        the query of step t + 1 has read y_t when it is the current state s_t, attend_from=current,
        that of step t + 2 when it is the previous state, attend_from=previous). Pieces past the
        EOS step take its row."""
        src, tgt = self.src_pieces[:-1], self.tgt_pieces[:-1]
        rows = self.matrix[shift:]
        if shift and len(rows) < len(tgt):
            rows = np.concatenate([rows] + [self.matrix[-1:]] * (len(tgt) - len(rows)), 0)
        return words_of(src), words_of(tgt), merge_to_words(rows, src, tgt, merge)


@dataclass(frozen=True)
class LinkRule:
    """How hard word links are read from attention (`align.*`; measured in docs/alignment.md).

    merge: a source word's weight from its pieces' (sum, mean, max); shift: 0 = the row of the step
    that predicts the target word, k = of the k-th step after (Shift-Att; `SentenceAlignment.words`); threshold: also every cell at
    or above it; cover_source: also link each source word that no target word chose to the target
    word that attends to it most (the column's argmax), so no source word is left out."""

    merge: str = "sum"
    shift: int = 0
    threshold: float | None = None
    cover_source: bool = False

    def links(self, alignment: SentenceAlignment) -> list[Link]:
        """The hard word links (Pharaoh, sorted by target then source word) of one sentence pair."""
        matrix = alignment.words(self.merge, self.shift)[2]
        links = hard_links(matrix, self.threshold)
        if self.cover_source and matrix.size:
            linked = {i for i, _ in links}
            links = sorted(set(links) | {(i, int(matrix[:, i].argmax())) for i in range(matrix.shape[1])
                                         if i not in linked and matrix[:, i].max() > 0},
                           key=lambda link: (link[1], link[0]))
        return links


def word_links(alignments: list[SentenceAlignment], threshold: float | None = None, rule: LinkRule | None = None) -> list[list[Link]]:
    """Hard word links (Pharaoh) of each sentence's merged word matrix, read by `rule` (default:
    the argmax of each target word's row, plus every cell >= threshold)."""
    rule = rule or LinkRule(threshold=threshold)
    return [rule.links(a) for a in alignments]


def diagonal_links(alignments: list[SentenceAlignment]) -> list[list[Link]]:
    """The baseline that knows nothing but lengths: target word j linked to the source word at the
    same relative position, floor((j + 1/2) |src| / |tgt|)."""
    out = []
    for a in alignments:
        n_src, n_tgt = len(word_groups(a.src_pieces[:-1])), len(word_groups(a.tgt_pieces[:-1]))
        out.append([(min(n_src - 1, int((j + 0.5) * n_src / n_tgt)), j) for j in range(n_tgt)] if n_src else [])
    return out
