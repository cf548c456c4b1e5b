"""What `train.precision=auto` trains in on a CPU: the faster of fp32 and bf16 autocast, timed on
this model's own training step.

A CPU's bf16 instructions say little about whether bf16 trains faster: the step is many small
per-target-token products plus the casts autocast adds around each. Measured on three hosts of the
same size (docs/performance.md): an Intel Xeon with AVX512-BF16 and no AMX trained 59% slower in
bf16; an AMD EPYC with AVX512-BF16 1.5x faster; an Intel Xeon with AMX (bf16 products about 3x as
fast as fp32) 14% slower. So auto times the real thing before training starts: forward and backward
passes of the first training batches in each precision (a few seconds for the default model), and
takes bf16 only where it is clearly faster.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch

from nmt.data.batching import Batch, BatchSampler
from nmt.model.seq2seq import Seq2Seq
from nmt.system.runtime import cpu_multiplies_bf16
from nmt.training.step import batch_loss

log = logging.getLogger(__name__)

# bf16 must make the step at least this much faster to be taken: it rounds every product's inputs,
# so a speed-up within the timing noise is not worth it.
TRAIN_BF16_MIN_SPEEDUP = 1.1
# Batches timed in each precision (after one for warm-up). Distinct batches, because a product's
# kernel is created for each new shape, and that costs more in bf16 with AMX: on one repeated batch
# such a Xeon timed bf16 1.2x faster, on the training's own batches 14% slower.
PROBE_BATCHES = 6
PassTimer = Callable[[torch.dtype | None, int], float]  # (dtype, batch number) -> seconds


def pass_seconds(model: Seq2Seq, batch: Batch, label_smoothing: float, dtype: torch.dtype | None) -> float:
    """Seconds of one forward and backward pass of `batch` (src: B x S, tgt: B x T ids) under
    autocast `dtype` (None: fp32), as `nmt.training.step.train_step` computes them; the gradients
    are dropped afterwards."""
    start = time.perf_counter()
    with torch.autocast(batch.src.device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        losses = batch_loss(model, batch, label_smoothing, None)
    ((losses.ce + losses.extra) / losses.tokens).backward()
    seconds = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    return seconds


def faster_in_bf16(timer: PassTimer, batches: int = PROBE_BATCHES) -> bool:
    """Whether bf16 autocast passes time at least TRAIN_BF16_MIN_SPEEDUP times as fast as fp32 ones
    over batches 1..`batches` (batch 0 warms both up: the first passes create threads and buffers),
    each batch timed in both precisions one after the other, so a slow minute of the host weighs on
    both alike."""
    if batches < 1:
        raise ValueError(f"faster_in_bf16 needs at least one timed batch, got {batches}")
    timer(None, 0), timer(torch.bfloat16, 0)
    fp32 = bf16 = 0.0
    for k in range(1, batches + 1):
        fp32 += timer(None, k)
        bf16 += timer(torch.bfloat16, k)
    faster = fp32 >= TRAIN_BF16_MIN_SPEEDUP * bf16
    log.info("train.precision=auto: %d batches took %.2f s in fp32, %.2f s in bf16 autocast (%.2fx): %s", batches, fp32, bf16,
             fp32 / bf16 if bf16 else float("inf"), "bf16" if faster else "fp32")
    return faster


def first_batches(sampler: BatchSampler, n: int = PROBE_BATCHES + 1) -> list[Batch]:
    """The first `n` batches of the first epoch: the shapes training starts with (from the start
    again when an epoch has fewer)."""
    indices = sampler.batches(0)
    return [sampler.collate(indices[k % len(indices)]) for k in range(n)]


def cpu_trains_faster_in_bf16(model: Seq2Seq, batches: list[Batch], label_smoothing: float) -> bool:
    """Whether this CPU trains `model` faster in bf16 autocast, timed on `batches` (the warm-up one
    first; False at once without bf16 instructions). The weights, the random streams (dropout) and
    the gradients are left as they were, so the run goes on exactly as without the measurement."""
    if not cpu_multiplies_bf16():
        return False
    rng = torch.get_rng_state()
    try:
        return faster_in_bf16(lambda dtype, k: pass_seconds(model, batches[k], label_smoothing, dtype), len(batches) - 1)
    finally:
        torch.set_rng_state(rng)
