"""The fused label-smoothed loss equals torch's cross_entropy in value and gradient."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from nmt.training.loss import smoothed_cross_entropy


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_value_and_gradient_match_cross_entropy(eps: float) -> None:
    torch.manual_seed(0)
    logits = torch.randn(7, 11, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 11, (7,))
    ours, nll = smoothed_cross_entropy(logits, target, eps)
    (g_ours,) = torch.autograd.grad(ours * 0.37, logits)
    ref = F.cross_entropy(logits, target, label_smoothing=eps, reduction="sum")
    (g_ref,) = torch.autograd.grad(ref * 0.37, logits)
    torch.testing.assert_close(ours, ref)
    torch.testing.assert_close(g_ours, g_ref)
    torch.testing.assert_close(nll, F.cross_entropy(logits, target, reduction="none").detach())
