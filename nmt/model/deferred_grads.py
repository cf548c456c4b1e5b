"""Weight gradients of the decoder's per-step layers, formed once per batch instead of once per step.

In the step loop, the recurrent projection of s_{i-1}, the context projection into the gates and
the attention's query projection run once per target step on about 200 rows; in backward, autograd
forms each one's weight gradient per step too, hundreds of small matrix products per batch that use
the CPU poorly. Inside `deferred_weight_grads(layers)` those layers run as `_DeferredLinear` (their
`forward` is swapped from outside; the model's code reads as plain `layer(x)`): its backward returns
only the input gradient and keeps (input, output gradient); `_Anchor`, an identity on the initial
decoder state s_0, turns the kept pairs into each weight's gradient with one large product,
dW = G^T X over all steps (and db = sum G), when its own backward runs. That is necessarily after
every step's: every deferred layer's input depends on s_0 (through the recurrence and the
attention), so s_0's gradient is complete only once all of theirs have been computed. The gradients
reach the weights through the anchor like any autograd gradient (accumulated, seen by
DistributedDataParallel's hooks). The mathematics is unchanged: tests/test_reference_decoder.py
compares loss and every gradient with a plain step-by-step implementation in float64.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class DeferredWeightGrads:
    """The kept (inputs, output gradients) of the deferred layers of one forward pass."""

    def __init__(self, layers: list[nn.Linear]) -> None:
        self.layers = layers
        self.inputs: dict[int, list[torch.Tensor]] = {id(layer): [] for layer in layers}
        self.grads: dict[int, list[torch.Tensor]] = {id(layer): [] for layer in layers}

    def linear(self, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        """layer(x) (x (..., in)) with its weight gradient deferred (a layer of `layers`). An input
        that needs no gradient (a constant start, as c_0 = 0) takes the ordinary path: nothing would
        call the deferred backward for it."""
        if not x.requires_grad:
            return F.linear(x, layer.weight, layer.bias)
        bias = layer.bias.detach() if layer.bias is not None else None
        return _DeferredLinear.apply(x, layer.weight.detach(), bias, self, id(layer))  # type: ignore[no-any-return]

    def anchor(self, s0: torch.Tensor) -> torch.Tensor:
        """The identity on s_0 (B, H), through which the deferred weight gradients are returned."""
        params = [p for layer in self.layers for p in (layer.weight, layer.bias) if p is not None]
        return _Anchor.apply(s0, self, *params)  # type: ignore[no-any-return]

    def weight_grads(self) -> list[torch.Tensor | None]:
        """dW = G^T X (and db = sum G) of each layer over every step, in `anchor`'s parameter order;
        empties the store. (It must: a kept input x holds its graph, whose deferred nodes hold this
        store, a cycle through autograd's C++ graph that Python's collector cannot see: every
        batch's activations would stay alive.)"""
        try:
            return self._weight_grads()
        finally:
            for kept in (*self.inputs.values(), *self.grads.values()):
                kept.clear()

    def _weight_grads(self) -> list[torch.Tensor | None]:
        grads: list[torch.Tensor | None] = []
        for layer in self.layers:
            key = id(layer)
            if not self.grads[key]:
                grads.extend([None] * (1 if layer.bias is None else 2))
                continue
            dtype = layer.weight.dtype  # (under autocast the kept tensors may be bf16)
            g, x = torch.cat(self.grads[key]).to(dtype), torch.cat(self.inputs[key]).to(dtype)
            grads.append(g.t().mm(x))
            if layer.bias is not None:
                grads.append(g.sum(0))
        return grads


@contextlib.contextmanager
def deferred_weight_grads(layers: list[nn.Linear]) -> Iterator[Callable[[torch.Tensor], torch.Tensor]]:
    """Inside: `layers` form their weight gradients once per batch. Yields the anchor, to apply to
    the initial state s_0 (B, H) before the steps that use the layers; outside, the layers are as
    they were."""
    store = DeferredWeightGrads(layers)
    for layer in layers:
        layer.forward = functools.partial(store.linear, layer)  # type: ignore[method-assign]
    try:
        yield store.anchor
    finally:
        for layer in layers:
            del layer.forward


class _DeferredLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,  # type: ignore[override]
                store: DeferredWeightGrads, key: int) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.store, ctx.key = store, key
        return F.linear(x, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None, None]:  # type: ignore[override]
        x, weight = ctx.saved_tensors
        ctx.store.inputs[ctx.key].append(x.reshape(-1, x.size(-1)))  # rows of any leading shape (B, d) or (B, 1, d)
        ctx.store.grads[ctx.key].append(grad.reshape(-1, grad.size(-1)))
        return grad.matmul(weight.to(grad.dtype)).to(x.dtype), None, None, None, None


class _Anchor(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, s0: torch.Tensor, store: DeferredWeightGrads, *params: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.store = store
        return s0.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:  # type: ignore[override]
        return (grad, None, *ctx.store.weight_grads())
