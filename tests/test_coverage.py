"""Coverage: the vector is the sum of past weights, it changes the scores, its loss is exact."""

from __future__ import annotations

import torch

from nmt.config.schema import AttentionConfig, Score
from nmt.model.build import build_attention


def make(weight: float = 1.0):  # noqa: ANN201
    torch.manual_seed(0)
    cfg = AttentionConfig(score=Score.general, coverage=True, coverage_hidden_size=4, coverage_loss_weight=weight)
    return build_attention(cfg, query_size=6, key_size=6).train()


def test_coverage_is_the_sum_of_past_weights_and_the_loss_is_sum_of_minima() -> None:
    attention = make(weight=0.5)
    keys = torch.randn(2, 5, 6)
    mask = torch.tensor([[1] * 5, [1, 1, 1, 0, 0]], dtype=torch.bool)
    memory = attention.memory(keys, keys, mask)
    alphas = []
    expected_loss = torch.zeros(2)
    for step in range(4):
        before = memory.coverage.clone()
        _, alpha = attention(torch.randn(2, 6), memory, step)
        expected_loss += torch.minimum(alpha, before).sum(1)
        alphas.append(alpha)
    torch.testing.assert_close(memory.coverage, torch.stack(alphas).sum(0))
    assert torch.all(memory.coverage[1, 3:] == 0)
    valid = torch.ones(2, 4, dtype=torch.bool)
    loss = attention.auxiliary_loss(memory, torch.zeros(2), valid)
    torch.testing.assert_close(loss, 0.5 * expected_loss.sum())
    valid[1, 2:] = False  # padded target steps do not count
    partial = attention.auxiliary_loss(memory, torch.zeros(2), valid)
    assert partial < loss


def test_coverage_feeds_the_score_and_gets_gradients() -> None:
    attention = make()
    keys = torch.randn(1, 4, 6)
    mask = torch.ones(1, 4, dtype=torch.bool)
    query = torch.randn(1, 6)
    fresh = attention.memory(keys, keys, mask)
    covered = attention.memory(keys, keys, mask)
    covered.coverage = torch.tensor([[3.0, 0.0, 0.0, 0.0]])
    _, a_fresh = attention(query, fresh, 0)
    _, a_covered = attention(query, covered, 0)
    assert not torch.allclose(a_fresh, a_covered)
    loss = attention.auxiliary_loss(covered, torch.zeros(1), torch.ones(1, 1, dtype=torch.bool)) + a_covered.sum()
    loss.backward()
    assert attention.coverage.w_c.weight.grad.abs().sum() > 0 and attention.coverage.v_c.weight.grad.abs().sum() > 0
