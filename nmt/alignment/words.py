"""Merge a subword attention matrix into a word matrix, using sentencepiece word boundaries; a
sentence pair's alignment (`SentenceAlignment`) and its hard word links.

A piece that starts with the sentencepiece space marker begins a new word. The weight of a source
word is the sum over its pieces (attention mass is additive over positions); the row of a target
word is the mean of its pieces' rows (each row is one distribution). Special tokens (EOS) belong
to no word: their row/column is dropped, so word rows may sum to less than 1.
"""

from __future__ import annotations

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


def merge_to_words(matrix: np.ndarray, src_pieces: list[str], tgt_pieces: list[str]) -> np.ndarray:
    """matrix (T_y', T_x') over target rows x source columns, whose first len(tgt_pieces) rows and
    len(src_pieces) columns are the pieces (any further ones, e.g. EOS, are dropped)
    -> (target words, source words): source pieces summed, target pieces averaged."""
    pieces = matrix[: len(tgt_pieces), : len(src_pieces)]
    src_groups, tgt_groups = word_groups(src_pieces), word_groups(tgt_pieces)
    by_src = np.stack([pieces[:, g].sum(1) for g in src_groups], 1) if src_groups else np.zeros((len(tgt_pieces), 0))
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

    def words(self) -> tuple[list[str], list[str], np.ndarray]:
        """(source words, target words, word matrix (target words, source words)); EOS dropped."""
        src, tgt = self.src_pieces[:-1], self.tgt_pieces[:-1]
        return words_of(src), words_of(tgt), merge_to_words(self.matrix, src, tgt)


def word_links(alignments: list[SentenceAlignment], threshold: float | None = None) -> list[list[Link]]:
    """Hard word links (Pharaoh) of each sentence's merged word matrix."""
    return [hard_links(a.words()[2], threshold) for a in alignments]


def diagonal_links(alignments: list[SentenceAlignment]) -> list[list[Link]]:
    """The baseline that knows nothing but lengths: target word j linked to the source word at the
    same relative position, floor((j + 1/2) |src| / |tgt|)."""
    out = []
    for a in alignments:
        n_src, n_tgt = len(word_groups(a.src_pieces[:-1])), len(word_groups(a.tgt_pieces[:-1]))
        out.append([(min(n_src - 1, int((j + 0.5) * n_src / n_tgt)), j) for j in range(n_tgt)] if n_src else [])
    return out
