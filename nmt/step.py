"""One optimisation step: loss on a batch, backward, clipping, and a guard against non-finite values."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import NamedTuple

import torch

from nmt.data.batching import Batch
from nmt.data.tokenizer import PAD
from nmt.loss import smoothed_cross_entropy
from nmt.model.seq2seq import Seq2Seq, Seq2SeqOutput

Forward = Callable[..., Seq2SeqOutput]


def batch_loss(
    model: Seq2Seq, batch: Batch, label_smoothing: float, forward: Forward | None = None
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """-> (summed label-smoothed cross-entropy over the real target tokens, the attention's
    auxiliary loss (0 for most modes), number of real target tokens).
    `forward`: what runs the model (a DistributedDataParallel wrapper of it); default `model`."""
    real = batch.tgt_out != PAD
    out = (forward or model)(batch.src, batch.src_lens, batch.tgt_in, positions=real)
    loss, nll = smoothed_cross_entropy(out.logits, batch.tgt_out[real], label_smoothing)
    return loss, model.auxiliary_loss(out, nll, real), out.logits.size(0)


class StepResult(NamedTuple):
    loss: float  # summed cross-entropy of the batch (nan when not finite)
    tokens: int  # real target tokens
    grad_norm: float  # total gradient norm before clipping
    finite: bool  # False: loss or gradient not finite, the update was skipped


def train_step(
    model: Seq2Seq,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    label_smoothing: float,
    clip: float,
    forward: Forward | None = None,
    autocast_dtype: torch.dtype | None = None,
    agree: Callable[[bool], bool] = lambda bad: bad,
) -> StepResult:
    """One optimiser step on a batch. A non-finite loss or gradient skips the update (and leaves
    the weights as they were). `autocast_dtype`: run the forward pass under autocast (bf16);
    `agree`: makes every process take the same skip decision (see `nmt.distributed.any_rank`)."""
    device_type = batch.src.device.type
    autocast = torch.autocast(device_type, dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()
    with autocast:
        loss, aux, n_tokens = batch_loss(model, batch, label_smoothing, forward)
    optimizer.zero_grad(set_to_none=True)
    ((loss + aux) / n_tokens).backward()
    if clip > 0:
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    else:  # still measured: it is how a non-finite gradient is noticed
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    value, grad_norm = float(loss.detach()), float(norm)
    bad = agree(not (math.isfinite(value) and math.isfinite(grad_norm)))
    if bad:
        optimizer.zero_grad(set_to_none=True)
        return StepResult(math.nan, n_tokens, grad_norm, False)
    optimizer.step()
    return StepResult(value, n_tokens, grad_norm, True)
