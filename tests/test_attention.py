"""The attention block: equations on hand-computed numbers, masking, normalisation."""

from __future__ import annotations

import math

import torch

from nmt.attention.block import Attention
from nmt.attention.modes import SoftNormaliser
from nmt.attention.scores import AdditiveScore, DotScore, GeneralScore, LocationScore, ScaledDotScore


def test_additive_score_matches_its_equation_by_hand() -> None:
    score = AdditiveScore(query_size=2, key_size=2, hidden_size=2)
    with torch.no_grad():
        score.W1.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
        score.W2.weight.copy_(torch.tensor([[0.5, 0.0], [0.0, 1.0]]))
        score.W2.bias.zero_()
        score.v.weight.copy_(torch.tensor([[1.0, -1.0]]))
    s = torch.tensor([[1.0, 0.5]])  # W1 s = [1, 1]
    h = torch.tensor([[[2.0, 0.0], [0.0, 1.0]]])  # W2 h_1 = [1, 0], W2 h_2 = [0, 1]
    e = score(s, score.prepare(h))
    expected = [math.tanh(2.0) - math.tanh(1.0), math.tanh(1.0) - math.tanh(2.0)]
    torch.testing.assert_close(e, torch.tensor([expected]))


def test_dot_general_scaled_location_by_hand() -> None:
    s = torch.tensor([[1.0, 2.0]])
    h = torch.tensor([[[3.0, 1.0], [0.0, -1.0]]])
    torch.testing.assert_close(DotScore()(s, h), torch.tensor([[5.0, -2.0]]))
    torch.testing.assert_close(ScaledDotScore(2)(s, h), torch.tensor([[5.0, -2.0]]) / math.sqrt(2))
    general = GeneralScore(2, 2)
    with torch.no_grad():
        general.W.weight.copy_(torch.tensor([[0.0, 1.0], [1.0, 0.0]]))  # W h swaps h's entries
    torch.testing.assert_close(general(s, general.prepare(h)), torch.tensor([[1 * 1 + 2 * 3.0, -1 * 1.0 + 0.0]]))
    location = LocationScore(2, max_source_len=3)
    with torch.no_grad():
        location.W.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        location.W.bias.zero_()
    torch.testing.assert_close(location(s, location.prepare(h)), torch.tensor([[1.0, 2.0]]))


def test_soft_rows_sum_to_one_and_padding_gets_zero() -> None:
    torch.manual_seed(0)
    att = Attention(AdditiveScore(6, 4, 5), SoftNormaliser())
    keys = torch.randn(3, 5, 4)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    memory = att.memory(keys, keys, mask)
    context, weights = att(torch.randn(3, 6), memory, step=0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3))
    assert torch.all(weights[~mask] == 0)
    assert torch.all(weights[mask] > 0)
    torch.testing.assert_close(context, torch.einsum("bs,bsd->bd", weights, keys))
    assert weights[2, 0] == 1.0
