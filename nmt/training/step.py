"""One optimisation step: loss on a batch, backward, clipping, and a guard against non-finite values."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import NamedTuple

import torch

from nmt.data.batching import Batch
from nmt.data.tokenizer import PAD
from nmt.model.seq2seq import Seq2Seq, Seq2SeqOutput
from nmt.training.loss import guided_alignment_loss, smoothed_cross_entropy

Forward = Callable[..., Seq2SeqOutput]


class Losses(NamedTuple):
    """The summed losses of a batch."""

    ce: torch.Tensor  # label-smoothed cross-entropy over the real target tokens
    extra: torch.Tensor  # the attention's own losses (REINFORCE, coverage); 0 for most modes
    guided: torch.Tensor | None  # guided-alignment cross-entropy, when the batch carries targets
    tokens: int  # real target tokens


def batch_loss(model: Seq2Seq, batch: Batch, label_smoothing: float, forward: Forward | None = None) -> Losses:
    """The losses of a batch. `forward`: what runs the model (a DistributedDataParallel wrapper of
    it); default `model`."""
    real = batch.tgt_out != PAD
    out = (forward or model)(batch.src, batch.src_lens, batch.tgt_in, positions=real)
    loss, nll = smoothed_cross_entropy(out.logits, batch.tgt_out[real], label_smoothing)
    guided = guided_alignment_loss(out.alphas, batch.guide) if batch.guide is not None else None
    return Losses(loss, model.auxiliary_loss(out, nll, real), guided, out.logits.size(0))


class StepResult(NamedTuple):
    loss: float  # summed cross-entropy of the batch (nan when not finite)
    tokens: int  # real target tokens
    grad_norm: float  # total gradient norm before clipping
    finite: bool  # False: loss or gradient not finite, the update was skipped
    guided: float = 0.0  # summed guided-alignment cross-entropy (0 without it)


def train_step(
    model: Seq2Seq,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    label_smoothing: float,
    clip: float,
    forward: Forward | None = None,
    autocast_dtype: torch.dtype | None = None,
    agree: Callable[[bool], bool] = lambda bad: bad,
    guide_weight: float = 0.0,
) -> StepResult:
    """One optimiser step on a batch, minimising (cross-entropy + the attention's own losses +
    guide_weight x guided-alignment loss) per target token. A non-finite loss or gradient skips
    the update (and leaves the weights as they were). `autocast_dtype`: run the forward pass under
    autocast (bf16); `agree`: makes every process take the same skip decision (see
    `nmt.system.distributed.any_rank`)."""
    device_type = batch.src.device.type
    autocast = torch.autocast(device_type, dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()
    with autocast:
        losses = batch_loss(model, batch, label_smoothing, forward)
    optimizer.zero_grad(set_to_none=True)
    total = losses.ce + losses.extra
    if losses.guided is not None:
        total = total + guide_weight * losses.guided
    (total / losses.tokens).backward()
    if clip > 0:
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    else:  # still measured: it is how a non-finite gradient is noticed
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    value, grad_norm = float(losses.ce.detach()), float(norm)
    guided = float(losses.guided.detach()) if losses.guided is not None else 0.0
    bad = agree(not (math.isfinite(value) and math.isfinite(grad_norm)))
    if bad:
        optimizer.zero_grad(set_to_none=True)
        return StepResult(math.nan, losses.tokens, grad_norm, False)
    optimizer.step()
    return StepResult(value, losses.tokens, grad_norm, True, guided)
