"""Inverted dropout whose mask is drawn as `rand(x.shape) >= p`, and word dropout, which drops a
token's whole embedding at once.

The same distribution as `nn.Dropout` (each element kept with probability 1 - p and scaled by
1 / (1 - p)), drawn differently: torch's dropout fills its mask with `bernoulli_`, slower than
drawing uniforms and comparing them on the 2-core Xeon of docs/performance.md (a training step
3% faster, `python scripts/bench/ablate_speed.py --variants optimised,torch_dropout`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class _MaskedScale(torch.autograd.Function):
    """x * mask * scale, keeping only the boolean mask for backward (1 byte per element)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:  # type: ignore[override]
        ctx.save_for_backward(mask)
        ctx.scale = scale
        return x * mask * scale

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        (mask,) = ctx.saved_tensors
        return grad * mask * ctx.scale, None, None


class Dropout(nn.Module):
    """Drop-in for `nn.Dropout(p)` (0 <= p < 1): x (...) -> x with each element zeroed with
    probability p and the rest scaled by 1 / (1 - p) in training; the identity in eval mode."""

    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        mask = torch.rand(self.mask_shape(x), device=x.device) >= self.p  # float32 uniforms whatever x's dtype (bf16 ones are coarse)
        return _MaskedScale.apply(x, mask, 1.0 / (1.0 - self.p))  # type: ignore[no-any-return]

    def mask_shape(self, x: torch.Tensor) -> tuple[int, ...]:
        """One draw per element."""
        return tuple(x.shape)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class WordDropout(Dropout):
    """Word dropout (Sennrich, Haddow and Birch 2016; Sennrich and Zhang 2019, who found it among the
    largest gains for small corpora): x (..., E) -> x with each token's whole vector zeroed with
    probability p and the rest scaled by 1 / (1 - p) in training; the identity in eval mode.

    Element dropout leaves every token partly visible; dropping whole tokens makes the model
    translate with words missing from its input, a regulariser of another kind."""

    def mask_shape(self, x: torch.Tensor) -> tuple[int, ...]:
        """One draw per token, broadcast over its E features."""
        return (*x.shape[:-1], 1)
