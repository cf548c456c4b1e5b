"""Alignment helpers on hand-made examples: word merge, Pharaoh I/O, AER by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from nmt.alignment.aer import alignment_error_rate
from nmt.alignment.pharaoh import format_links, hard_links, parse_line, read_pharaoh
from nmt.alignment.words import merge_to_words, word_groups, words_of
from nmt.system.errors import UserError


def test_word_groups_follow_sentencepiece_boundaries() -> None:
    pieces = ["▁Ein", "▁Hund", "e", "s", "▁", ".", "▁läuft"]
    assert word_groups(pieces) == [[0], [1, 2, 3], [4, 5], [6]]
    assert words_of(pieces) == ["Ein", "Hundes", ".", "läuft"]


def test_merge_sums_source_pieces_and_averages_target_pieces() -> None:
    src = ["▁a", "b", "▁c"]  # words: ab, c  (+ EOS column)
    tgt = ["▁x", "▁y", "z"]  # words: x, yz  (+ EOS row)
    matrix = np.array([
        [0.5, 0.25, 0.25, 0.0],
        [0.1, 0.1, 0.7, 0.1],
        [0.6, 0.2, 0.1, 0.1],
        [0.0, 0.0, 0.0, 1.0],  # EOS row: dropped
    ])
    words = merge_to_words(matrix, src, tgt)
    expected = np.array([
        [0.75, 0.25],
        [((0.1 + 0.1) + (0.6 + 0.2)) / 2, (0.7 + 0.1) / 2],
    ])
    np.testing.assert_allclose(words, expected)


def test_hard_links_take_each_target_words_argmax_and_optionally_a_threshold() -> None:
    matrix = np.array([[0.7, 0.3, 0.0], [0.1, 0.45, 0.45], [0.0, 0.0, 0.0]])
    assert hard_links(matrix) == [(0, 0), (1, 1)]  # ties: first; an all-zero row: no link
    assert hard_links(matrix, threshold=0.3) == [(0, 0), (1, 0), (1, 1), (2, 1)]
    assert format_links(hard_links(matrix)) == "0-0 1-1"


def test_pharaoh_reading_and_writing(tmp_path: Path) -> None:
    path = tmp_path / "gold.txt"
    path.write_text("0-0 1p2 2-1\n\n3-3 3p3\n")
    gold = read_pharaoh(path)
    assert gold == [({(0, 0), (2, 1)}, {(1, 2)}), (set(), set()), ({(3, 3)}, set())]
    assert parse_line("1-1 2p3", one_based=True) == ({(0, 0)}, {(1, 2)})
    with pytest.raises(UserError, match="gold.txt:1: '0:1' is not a Pharaoh link"):
        parse_line("0:1", where=f"{path}:1")
    with pytest.raises(UserError, match="negative index"):
        parse_line("0-1", one_based=True)
    round_trip = parse_line(format_links([(0, 0), (4, 2)]))
    assert round_trip == ({(0, 0), (4, 2)}, set())


def test_aer_against_numbers_computed_by_hand() -> None:
    # sentence 1: S = {0-0, 1-1}, P = S + {2-1}; A = {0-0, 2-1, 2-2}
    # sentence 2: S = {0-0},      P = S;         A = {0-0}
    gold = [({(0, 0), (1, 1)}, {(2, 1)}), ({(0, 0)}, set())]
    predicted = [[(0, 0), (2, 1), (2, 2)], [(0, 0)]]
    scores = alignment_error_rate(predicted, gold)
    # |A| = 4, |S| = 3, |A&S| = 2, |A&P| = 3
    assert scores.precision == pytest.approx(3 / 4)
    assert scores.recall == pytest.approx(2 / 3)
    assert scores.aer == pytest.approx(1 - (2 + 3) / (4 + 3))
    perfect = alignment_error_rate([[(0, 0), (1, 1)]], [({(0, 0), (1, 1)}, set())])
    assert (perfect.precision, perfect.recall, perfect.aer) == (1.0, 1.0, 0.0)
