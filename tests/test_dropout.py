"""nmt.model.dropout.Dropout: the distribution of nn.Dropout (drawn differently), its gradient, eval mode."""

from __future__ import annotations

import pytest
import torch

from nmt.model.dropout import Dropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_drops_a_fraction_p_and_scales_the_rest(p: float) -> None:
    torch.manual_seed(0)
    x = torch.rand(1000, 1000) + 0.5  # no zeros of its own
    y = Dropout(p).train()(x)
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - p) < 0.003  # 1e6 draws: the standard error is below 0.0005
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))
    assert abs(y.mean().item() - x.mean().item()) < 0.003  # expectation preserved


def test_gradient_is_the_same_mask_and_scale() -> None:
    torch.manual_seed(1)
    x = torch.randn(64, 32, dtype=torch.float64, requires_grad=True)
    layer = Dropout(0.3).train()
    y = layer(x)
    upstream = torch.randn_like(y)
    (y * upstream).sum().backward()
    mask = (y != 0).double()
    torch.testing.assert_close(x.grad, upstream * mask / 0.7)
    torch.manual_seed(2)
    assert torch.autograd.gradcheck(lambda t: (torch.manual_seed(3), layer(t))[1], (x.detach().requires_grad_(),))


def test_identity_in_eval_mode_and_at_zero() -> None:
    x = torch.randn(5, 7)
    assert Dropout(0.5).eval()(x) is x
    assert Dropout(0.0).train()(x) is x


def test_seeded_draws_repeat_and_keep_the_dtype() -> None:
    x = torch.randn(50, 40, dtype=torch.bfloat16)
    torch.manual_seed(4)
    a = Dropout(0.3).train()(x)
    torch.manual_seed(4)
    b = Dropout(0.3).train()(x)
    assert a.dtype == torch.bfloat16
    assert torch.equal(a, b)


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_refuses_probabilities_outside_0_1(p: float) -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        Dropout(p)
