#!/usr/bin/env python
"""What each training-speed change buys: forward + backward time of the same batches of the
default model (Multi30k), with one optimisation at a time taken away, and with the optional
switches (bf16 autocast, torch.compile) turned on. Prints a Markdown table (median ms per step
over `--repeats` passes over `--batches` typical batches); docs/performance.md quotes it.

    python scripts/bench/ablate_speed.py [--batches 6] [--repeats 3] [--variants reference,plain_ce,...]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from nmt.config.schema import CellType, DataConfig, ModelConfig
from nmt.data.batching import Batch, BatchSampler
from nmt.data.prepare import prepare
from nmt.data.tokenizer import PAD
from nmt.model.build import build_model
from nmt.model.dropout import Dropout
from nmt.model.seq2seq import Seq2Seq
from nmt.system.runtime import configure_allocator, seed_everything, set_threads
from nmt.training.step import batch_loss

EPS = 0.1


def _reference_loss() -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """The test oracle, `tests/reference_model.py` (not part of the package): equations 1-5 step by step."""
    path = Path(__file__).resolve().parents[2] / "tests" / "reference_model.py"
    spec = importlib.util.spec_from_file_location("reference_model", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reference_loss  # type: ignore[no-any-return]


def optimised(model: Seq2Seq, batch: Batch) -> torch.Tensor:
    return batch_loss(model, batch, EPS)[0]


def plain_ce(model: Seq2Seq, batch: Batch) -> torch.Tensor:
    """Fast decoder, but autograd's cross-entropy instead of the fused one."""
    real = batch.tgt_out != PAD
    out = model(batch.src, batch.src_lens, batch.tgt_in, positions=real)
    return F.cross_entropy(out.logits, batch.tgt_out[real], label_smoothing=EPS, reduction="sum")


def all_positions(model: Seq2Seq, batch: Batch) -> torch.Tensor:
    """Fast decoder, but the vocabulary projection over every (padded) position."""
    out = model(batch.src, batch.src_lens, batch.tgt_in)
    return F.cross_entropy(out.logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD, label_smoothing=EPS, reduction="sum")


def reference(model: Seq2Seq, batch: Batch) -> torch.Tensor:
    """The plain step-by-step implementation (tests/reference_model.py): nothing hoisted."""
    return _reference_loss()(model, batch.src, batch.src_lens, batch.tgt_in, batch.tgt_out, CellType.gru, EPS)[0]


def per_step_weight_grads(model: Seq2Seq, batch: Batch) -> torch.Tensor:
    """Fast decoder, but autograd's weight gradients of the per-step layers, one per step (nmt.model.deferred_grads off)."""
    model.decoder.defer_weight_grads = False
    try:
        return batch_loss(model, batch, EPS)[0]
    finally:
        model.decoder.defer_weight_grads = True


def torch_dropout(model: Seq2Seq, batch: Batch) -> torch.Tensor:
    """The default, but torch's dropout (masks from bernoulli_) instead of nmt.model.dropout's."""
    swapped = {name: module for name, module in model.named_modules() if isinstance(module, Dropout)}
    try:
        for name, module in swapped.items():
            model.set_submodule(name, nn.Dropout(module.p))
        return batch_loss(model, batch, EPS)[0]
    finally:
        for name, module in swapped.items():
            model.set_submodule(name, module)


def bf16(model: Seq2Seq, batch: Batch) -> torch.Tensor:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return batch_loss(model, batch, EPS)[0]


VARIANTS: dict[str, tuple[str, Callable[[Seq2Seq, Batch], torch.Tensor]]] = {
    "reference": ("plain step-by-step reference (nothing hoisted, torch cross-entropy on all positions)", reference),
    "all_positions": ("fast decoder, vocabulary projection on padded positions too", all_positions),
    "plain_ce": ("fast decoder, autograd cross-entropy instead of the fused one", plain_ce),
    "per_step_weight_grads": ("fast decoder, per-step weight gradients (autograd's) instead of deferred ones", per_step_weight_grads),
    "torch_dropout": ("fast decoder, torch's dropout (bernoulli_ masks) instead of nmt.model.dropout's", torch_dropout),
    "optimised": ("fast decoder + fused loss (the default)", optimised),
    "bf16": ("the default under bf16 autocast (`train.precision=bf16`)", bf16),
    "compile": ("the default with the decoder step compiled (`train.compile=true`)", optimised),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args()
    configure_allocator()
    set_threads(0)
    data = prepare(DataConfig())
    sampler = BatchSampler(data.split("train"), DataConfig().batch_tokens, True, 42)
    batches = [sampler.collate(i) for i in sorted(sampler.batches(0)[:60], key=len)[20 : 20 + args.batches]]
    tokens = statistics.mean(int((b.tgt_out != PAD).sum()) for b in batches)
    print(f"{args.batches} batches of about {tokens:.0f} target tokens, {torch.get_num_threads()} threads\n")
    results: dict[str, float] = {}
    for name in args.variants.split(","):
        label, fn = VARIANTS[name]
        seed_everything(0)
        model = build_model(ModelConfig(), len(data.src_tokenizer), len(data.tgt_tokenizer)).train()
        if name == "compile":
            model.decoder.compile_step()
        for batch in batches[:2]:  # warm-up (and compilation)
            fn(model, batch).backward()
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            for batch in batches:
                model.zero_grad(set_to_none=True)
                fn(model, batch).backward()
            times.append((time.perf_counter() - start) / len(batches))
        results[name] = 1000 * statistics.median(times)
        print(f"{name}: {results[name]:.0f} ms", file=sys.stderr, flush=True)
    print("| variant | ms per step (forward + backward) | time vs default |\n|---|---|---|")
    for name, ms in results.items():
        ratio = f"{ms / results['optimised']:.2f}x" if "optimised" in results else ""
        print(f"| {VARIANTS[name][0]} | {ms:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
