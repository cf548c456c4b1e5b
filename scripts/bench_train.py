#!/usr/bin/env python
"""Training throughput: steady-state target tokens/s, peak memory and model FLOP utilisation.

For a config (Hydra overrides, default: the README's main job), trains on the first batches of
the shuffled first epoch: `--warmup` steps, then `--steps` timed steps, `--runs` times (the model
is rebuilt from the seed each run); each timed step includes batch assembly and the optimiser, as
in `nmt.train`. FLOPs of the training step (forward + backward) are counted by
`torch.utils.flop_counter` on those batches; FLOP utilisation divides the achieved FLOP/s by this
machine's fp32 matmul FLOP/s, measured here too, before each run (the median). Prints one JSON line (medians over runs):

    python scripts/bench_train.py [--steps 40] [--runs 3] [overrides ...]
    python scripts/bench_train.py data.batch_sentences=64 data.batch_tokens=100000
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from nmt.cli import compose_train_config
from nmt.data.batching import BatchSampler
from nmt.data.tokenizer import PAD
from nmt.model.build import build_model
from nmt.runtime import autocast_dtype, configure_allocator, machine_description, resolve_device, seed_everything, set_threads
from nmt.step import batch_loss, train_step


def matmul_flops(threads: int, size: int = 2048, repeats: int = 10, dtype: torch.dtype = torch.float32) -> float:
    """This machine's dense matmul FLOP/s (median of `repeats` size^3 products)."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    torch.mm(a, b)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for nmt.train")
    args = parser.parse_args()

    cfg = compose_train_config(args.overrides)
    seed_everything(cfg.seed)
    configure_allocator()
    set_threads(cfg.train.threads)
    device = resolve_device(cfg.train.device)
    cast = autocast_dtype(cfg.train.precision.value, device)

    from nmt.data.prepare import prepare

    data = prepare(cfg.data)
    sampler = BatchSampler(data.split("train"), cfg.data.batch_tokens, True, cfg.seed, cfg.data.batch_sentences)
    indices = sampler.batches(0)[: args.warmup + args.steps]
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    tokens_per_s, sentences_per_s, step_ms, peaks = [], [], [], []
    model = None
    for run in range(args.runs):
        if device.type == "cpu":  # the machine's rate beside each run, under the same conditions
            peaks.append(matmul_flops(torch.get_num_threads()))
        seed_everything(cfg.seed)
        model = build_model(cfg.model, len(data.src_tokenizer), len(data.tgt_tokenizer)).to(device).train()
        if cfg.train.compile:
            model.decoder.compile_step()
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)
        for index in indices[: args.warmup]:
            train_step(model, optimizer, sampler.collate(index).to(device), cfg.train.label_smoothing, cfg.train.clip_grad_norm, None, cast)
        if device.type == "cuda":
            torch.cuda.synchronize()
        tokens = sentences = 0
        start = time.perf_counter()
        for index in indices[args.warmup :]:
            result = train_step(
                model, optimizer, sampler.collate(index).to(device), cfg.train.label_smoothing, cfg.train.clip_grad_norm, None, cast
            )
            tokens += result.tokens
            sentences += len(index)
        if device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        tokens_per_s.append(tokens / elapsed)
        sentences_per_s.append(sentences / elapsed)
        step_ms.append(1000 * elapsed / args.steps)
        print(f"run {run + 1}: {tokens / elapsed:.0f} target tokens/s", file=sys.stderr)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    assert model is not None
    flops = 0  # forward + backward matmul FLOPs of the timed batches
    for index in indices[args.warmup :]:
        batch = sampler.collate(index).to(device)
        with FlopCounterMode(display=False) as counter:
            loss, aux, _, n = batch_loss(model, batch, cfg.train.label_smoothing)
            ((loss + aux) / n).backward()
        flops += counter.get_total_flops()
        model.zero_grad(set_to_none=True)
    timed_tokens = sum(int((sampler.collate(i).tgt_out != PAD).sum()) for i in indices[args.warmup :])
    flop_per_token = flops / timed_tokens
    achieved = statistics.median(tokens_per_s) * flop_per_token
    peak = statistics.median(peaks) if peaks else float("nan")
    print(json.dumps({
        "overrides": args.overrides, "device": str(device), "precision": "bf16" if cast else "fp32", "compile": cfg.train.compile,
        "threads": torch.get_num_threads(), "runs": args.runs, "steps": args.steps,
        "tokens_per_s": round(statistics.median(tokens_per_s), 1), "sentences_per_s": round(statistics.median(sentences_per_s), 1),
        "step_ms": round(statistics.median(step_ms), 1), "tokens_per_step": round(timed_tokens / args.steps, 1),
        "gflop_per_step": round(flops / args.steps / 1e9, 2), "achieved_gflop_s": round(achieved / 1e9, 2),
        "machine_fp32_matmul_gflop_s": round(peak / 1e9, 1), "flop_utilisation": round(achieved / peak, 4),
        "peak_rss_mib": round(peak_rss, 1), "rss_before_training_mib": round(rss_before, 1),
        "machine": machine_description(),
    }))


if __name__ == "__main__":
    main()
