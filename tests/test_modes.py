"""Modes (normalisers): hard rows are one-hot, local windows are exact, every score gets gradients."""

from __future__ import annotations

import itertools

import pytest
import torch

from nmt.attention.memory import AttentionMemory
from nmt.attention.modes import GumbelHardNormaliser, LocalNormaliser, ReinforceHardNormaliser
from nmt.config.schema import AttentionConfig, HardEstimator, LocalVariant, Mode, Score
from nmt.model.build import build_attention

MASK = torch.tensor([[1] * 9, [1] * 6 + [0] * 3, [1] * 2 + [0] * 7], dtype=torch.bool)


def memory(d: int = 8) -> AttentionMemory:
    keys = torch.randn(3, 9, d)
    return AttentionMemory(keys, keys, MASK)


@pytest.mark.parametrize("normaliser", [GumbelHardNormaliser(1.0), ReinforceHardNormaliser(0.9, 0.01)])
@pytest.mark.parametrize("training", [True, False])
def test_hard_rows_are_one_hot_on_real_tokens(normaliser: torch.nn.Module, training: bool) -> None:
    torch.manual_seed(0)
    normaliser.train(training)
    for step in range(20):
        weights = normaliser(torch.randn(3, 9), memory(), torch.randn(3, 4), step)
        assert torch.equal(weights.detach().sum(-1), torch.ones(3))
        assert set(weights.detach().unique().tolist()) <= {0.0, 1.0}
        assert torch.all(weights.detach()[~MASK] == 0)


def test_hard_inference_is_the_argmax() -> None:
    scores = torch.randn(3, 9)
    weights = GumbelHardNormaliser(1.0).eval()(scores, memory(), torch.randn(3, 4), 0)
    expected = scores.masked_fill(~MASK, float("-inf")).argmax(-1)
    assert torch.equal(weights.argmax(-1), expected)


@pytest.mark.parametrize("predictive", [False, True])
def test_local_weights_are_zero_outside_the_window(predictive: bool) -> None:
    torch.manual_seed(0)
    window = 2
    local = LocalNormaliser(window, predictive, query_size=4, hidden_size=5)
    mem = memory()
    lengths = MASK.sum(1).float()
    for step in range(12):
        query = torch.randn(3, 4) * 3
        weights = local(torch.randn(3, 9), mem, query, step)
        p = local.position(mem, query, step)
        assert torch.all((p >= 0) & (p <= lengths))  # p_i in [0, T_x]
        j = torch.arange(9).float()
        outside = ((j.unsqueeze(0) - p.unsqueeze(1)).abs() > window) | ~MASK
        assert torch.all(weights[outside] == 0)
        assert torch.all(weights[~outside] > 0)
        if not predictive:
            torch.testing.assert_close(p, torch.clamp(lengths - 1, max=float(step)))
            torch.testing.assert_close(weights.sum(-1), torch.ones(3))
        else:
            assert torch.all(weights.sum(-1) <= 1 + 1e-6)


def test_local_p_gaussian_by_hand() -> None:
    """One sentence, D = 2, p fixed at 1.5 by the predictor's weights: alpha = softmax(window) * exp(-(j-p)^2/2)."""
    local = LocalNormaliser(2, True, query_size=1, hidden_size=1)
    with torch.no_grad():
        local.W_p.weight.fill_(1.0)
        local.v_p.weight.fill_(1.0)
    mem = AttentionMemory(torch.zeros(1, 5, 2), torch.zeros(1, 5, 2), torch.ones(1, 5, dtype=torch.bool))
    # choose s so that 5 * sigmoid(tanh(s)) = 1.5
    target = torch.logit(torch.tensor(0.3))
    query = torch.atanh(target).reshape(1, 1)
    weights = local(torch.zeros(1, 5), mem, query, 0)
    p = 1.5
    window = [j for j in range(5) if abs(j - p) <= 2]  # 0..3
    expected = [(1 / len(window)) * torch.exp(torch.tensor(-((j - p) ** 2) / 2.0)).item() if j in window else 0.0 for j in range(5)]
    torch.testing.assert_close(weights, torch.tensor([expected]), atol=1e-5, rtol=1e-5)


MODES = [
    (Mode.soft, {}),
    (Mode.hard, {"hard_estimator": HardEstimator.gumbel}),
    (Mode.hard, {"hard_estimator": HardEstimator.reinforce}),
    (Mode.local, {"local": LocalVariant.monotonic, "window": 2}),
    (Mode.local, {"local": LocalVariant.predictive, "window": 2}),
]


@pytest.mark.parametrize(("score", "mode"), list(itertools.product(list(Score), range(len(MODES)))))
def test_gradients_reach_every_parameter(score: Score, mode: int) -> None:
    torch.manual_seed(0)
    name, extra = MODES[mode]
    cfg = AttentionConfig(score=score, mode=name, hidden_size=6, max_source_len=9, **extra)
    attention = build_attention(cfg, query_size=8, key_size=8).train()
    keys = torch.randn(3, 9, 8, requires_grad=True)
    queries = torch.randn(4, 3, 8, requires_grad=True)
    mem = attention.memory(keys, torch.randn(3, 9, 8), MASK)
    total = torch.zeros(())
    for step in range(4):
        context, _ = attention(queries[step], mem, step)
        total = total + (context * torch.randn_like(context)).sum()
    aux = attention.auxiliary_loss(mem, reward=torch.randn(3), valid=torch.ones(3, 4, dtype=torch.bool))
    total = total + (aux if aux is not None else 0)
    total.backward()
    inputs = {"query": queries} if score == Score.location else {"query": queries, "keys": keys}
    for pname, param in [*attention.named_parameters(), *inputs.items()]:
        assert param.grad is not None and param.grad.abs().sum() > 0, pname


def test_reinforce_baseline_tracks_the_reward() -> None:
    norm = ReinforceHardNormaliser(baseline_decay=0.5, entropy_weight=0.0).train()
    for reward in (1.0, 3.0):
        mem = memory()
        norm(torch.randn(3, 9, requires_grad=True), mem, torch.randn(3, 4), 0)
        norm.auxiliary_loss(mem, torch.full((3,), reward), torch.ones(3, 1, dtype=torch.bool))
    assert norm.baseline.item() == pytest.approx(0.5 * 1.0 + 0.5 * 3.0)
