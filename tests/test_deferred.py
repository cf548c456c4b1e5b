"""Deferred weight gradients (nmt.model.deferred_grads): the same gradients as autograd's, and nothing kept
alive after backward (a leak here grew a training process by gigabytes a minute)."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from test_reference_decoder import MODES, _Batch, tiny_model, toy_batch
from torch import nn

from nmt.config.schema import AttendFrom, CellType, Mode, Score
from nmt.model.deferred_grads import DeferredWeightGrads
from nmt.training.step import batch_loss


def _recurrence(layer: nn.Linear, s0: torch.Tensor, steps: int, store: DeferredWeightGrads | None) -> torch.Tensor:
    """s_i = tanh(layer(s_{i-1})), summed over steps; (B, H) -> scalar."""
    state, total = (store.anchor(s0) if store else s0), s0.new_zeros(())
    for _ in range(steps):
        state = torch.tanh(store.linear(layer, state) if store else layer(state))
        total = total + state.sum()
    return total


def test_deferred_gradients_equal_autograds() -> None:
    torch.manual_seed(0)
    layer = nn.Linear(5, 5).double()
    s0 = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    _recurrence(layer, s0, 4, None).backward()
    expected = [p.grad.clone() for p in (layer.weight, layer.bias, s0)]  # type: ignore[union-attr]
    layer.zero_grad()
    s0.grad = None
    _recurrence(layer, s0, 4, DeferredWeightGrads([layer])).backward()
    for got, want in zip((layer.weight.grad, layer.bias.grad, s0.grad), expected, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_store_is_emptied_and_freed_after_backward() -> None:
    torch.manual_seed(0)
    layer = nn.Linear(4, 4)
    store = DeferredWeightGrads([layer])
    s0 = torch.randn(2, 4, requires_grad=True)
    loss = _recurrence(layer, s0, 3, store)
    loss.backward()
    assert all(not kept for kept in (*store.inputs.values(), *store.grads.values()))
    ref = weakref.ref(store)
    del store, loss
    gc.collect()
    assert ref() is None, "the deferred store (and the graph it holds) outlived its backward pass"


@pytest.mark.parametrize(("mode", "extra"), MODES, ids=["soft", "hard-gumbel", "hard-reinforce", "local-m", "local-p"])
def test_training_steps_leave_no_store_alive(mode: Mode, extra: dict) -> None:
    model = tiny_model(Score.additive, mode, extra, CellType.gru, AttendFrom.previous)
    batch = _Batch(*toy_batch())
    for _ in range(3):
        batch_loss(model, batch, 0.1).ce.backward()  # type: ignore[arg-type]
    gc.collect()
    alive = [o for o in gc.get_objects() if type(o) is DeferredWeightGrads]
    assert not alive, f"{len(alive)} deferred stores still alive after 3 backward passes"
