"""The attention block: equations on hand-computed numbers, masking, normalisation."""

from __future__ import annotations

import math

import torch

from nmt.attention.block import Attention, CoverageTerm
from nmt.attention.modes import LocalNormaliser, SoftNormaliser
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


def test_self_attention_layer_follows_the_seed_with_every_score() -> None:
    """h_i = x_i + sum_j alpha_ij (W_V x_j), alpha_i. = softmax_j(a(W_Q x_i, W_K x_j)), padding excluded."""
    from nmt.attention.self_attention import SelfAttentionLayer
    from nmt.config.schema import AttentionConfig
    from nmt.model.build import SCORES

    torch.manual_seed(0)
    x = torch.randn(2, 4, 6)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
    for name, make in SCORES.items():
        layer = SelfAttentionLayer(6, make(AttentionConfig(hidden_size=5, max_source_len=4), 6, 6), 0.0)
        h, weights = layer(x, mask)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4))
        assert torch.all(weights[1, :, 2:] == 0), name
        q, k, v = layer.W_Q(x[1, :2]), layer.W_K(x[1, :2]), layer.W_V(x[1, :2])
        e = torch.stack([layer.score(q[i : i + 1], layer.score.prepare(k.unsqueeze(0)))[0] for i in range(2)])
        expected = x[1, :2] + torch.softmax(e, -1) @ v
        torch.testing.assert_close(h[1, :2], expected, atol=1e-5, rtol=1e-5)
        assert torch.all(h[1, 2:] == 0)


def test_the_block_computes_in_fp32_inside_bf16_autocast() -> None:
    """train.precision=bf16 (and decoding's bf16) run the model's products in bf16; the attention
    block must not: its weights are what the tool shows. Inside autocast it gives what it gives
    outside, in fp32, even from bf16 inputs (the encoder's and decoder's bf16 outputs)."""
    torch.manual_seed(0)
    keys, query = torch.randn(3, 7, 16), torch.randn(3, 12)
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[1, 5:] = False
    blocks = [Attention(score, SoftNormaliser()) for score in (AdditiveScore(12, 16, 10), GeneralScore(12, 16), LocationScore(12, 7))]
    blocks.append(Attention(AdditiveScore(12, 16, 10), SoftNormaliser(), CoverageTerm(4), 1.0))  # its accumulator too
    blocks.append(Attention(AdditiveScore(12, 16, 10), LocalNormaliser(2, True, 12, 6)))  # local-p's position
    for att in blocks:
        q, k = query.bfloat16().float(), keys.bfloat16().float()  # the values bf16 inputs carry
        want_memory = att.memory(k, k, mask)
        want = [att(q, want_memory, step) for step in (0, 1)]  # two steps: coverage then holds the first's weights
        with torch.autocast("cpu", dtype=torch.bfloat16):
            memory = att.memory(keys.bfloat16(), keys.bfloat16(), mask)
            got = [att(query.bfloat16(), memory, step) for step in (0, 1)]
        assert memory.keys.dtype == memory.values.dtype == torch.float32
        for (context, weights), (want_context, want_weights) in zip(got, want):
            assert weights.dtype == context.dtype == torch.float32
            torch.testing.assert_close(weights, want_weights, rtol=1e-6, atol=1e-7)
            torch.testing.assert_close(context, want_context, rtol=1e-6, atol=1e-7)
            assert float(weights.detach()[1, 5:].abs().sum()) == 0.0
