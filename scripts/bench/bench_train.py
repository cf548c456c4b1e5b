#!/usr/bin/env python
"""Training throughput: steady-state target tokens/s, peak memory and model FLOP utilisation.

For a config (Hydra overrides, default: the README's main job), trains on the first batches of
the shuffled first epoch: `--warmup` steps, then `--steps` timed steps, `--runs` times (the model
is rebuilt from the seed each run); each timed step includes batch assembly and the optimiser, as
in `nmt.train`. With `train.ensemble_size=N` (the cpu_ensemble preset trains 2 models) it measures what
that run does: N processes, each training its model (seed + k, its share of the cores, as
`nmt.training.side_by_side` sets them up) at the same time, their timed steps started together; the
throughput is their sum. FLOPs of the training step (forward + backward) are counted by
`torch.utils.flop_counter` on each model's batches; FLOP utilisation divides the achieved FLOP/s
(of all models together) by this machine's fp32 matmul FLOP/s on all the cores the run uses,
measured before each run while the models wait (the median). Prints one JSON line (medians over runs):

    python scripts/bench/bench_train.py [--steps 40] [--runs 3] [overrides ...]
    python scripts/bench/bench_train.py +experiment=cpu_ensemble       # the two-model preset, one core each
    python scripts/bench/bench_train.py data.batch_sentences=64 data.batch_tokens=100000
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from nmt.config.schema import Config
from nmt.data.batching import BatchSampler
from nmt.data.tokenizer import PAD
from nmt.model.build import build_model
from nmt.system.cli import compose_train_config, quiet_libraries
from nmt.system.runtime import (
    configure_allocator,
    cpu_bf16_speedup,
    machine_description,
    precision_dtype,
    resolve_device,
    seed_everything,
    set_threads,
)
from nmt.training.precision import cpu_trains_faster_in_bf16, first_batches
from nmt.training.side_by_side import member_config
from nmt.training.step import batch_loss, train_step


def matmul_flops(size: int = 2048, repeats: int = 10, dtype: torch.dtype = torch.float32) -> float:
    """This machine's dense matmul FLOP/s on torch's current threads (median of `repeats` size^3 products)."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    torch.mm(a, b)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - start)
    return 2 * size**3 / statistics.median(times)


def measure(cfg: Config, steps: int, warmup: int, runs: int, before_timed: Callable[[], None]) -> dict[str, Any]:
    """Train one model as `cfg` says, `runs` times -> per-run tokens/s, sentences/s and step times,
    FLOPs per target token, peak RSS. `before_timed` runs before each run's timed steps, after its
    warm-up (measuring the machine's rate, or waiting for the other models, so that models measured
    in several processes time the same seconds)."""
    quiet_libraries(progress=False)
    seed_everything(cfg.seed)
    configure_allocator()
    set_threads(cfg.train.threads)
    device = resolve_device(cfg.train.device)

    from nmt.data.prepare import prepare

    data = prepare(cfg.data)
    sampler = BatchSampler(data.split("train"), cfg.data.batch_tokens, True, cfg.seed, cfg.data.batch_sentences)
    indices = sampler.batches(0)[: warmup + steps]
    seed_everything(cfg.seed)
    probe = build_model(cfg.model, len(data.src_tokenizer), len(data.tgt_tokenizer)).to(device).train()
    probe_batches = [b.to(device) for b in first_batches(sampler)]
    cast = precision_dtype(cfg.train.precision.value, device,  # as training decides it (nmt.training.precision)
                           lambda: cpu_trains_faster_in_bf16(probe, probe_batches, cfg.train.label_smoothing))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, index: Any) -> int:
        batch = sampler.collate(index).to(device)
        return train_step(model, optimizer, batch, cfg.train.label_smoothing, cfg.train.clip_grad_norm, None, cast).tokens

    tokens_per_s, sentences_per_s, step_ms = [], [], []
    model = None
    for _ in range(runs):
        seed_everything(cfg.seed)
        model = build_model(cfg.model, len(data.src_tokenizer), len(data.tgt_tokenizer)).to(device).train()
        if cfg.train.compile:
            model.decoder.compile_step()
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)
        for index in indices[:warmup]:
            step(model, optimizer, index)
        if device.type == "cuda":
            torch.cuda.synchronize()
        before_timed()
        tokens = sentences = 0
        start = time.perf_counter()
        for index in indices[warmup:]:
            tokens += step(model, optimizer, index)
            sentences += len(index)
        if device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        tokens_per_s.append(tokens / elapsed)
        sentences_per_s.append(sentences / elapsed)
        step_ms.append(1000 * elapsed / steps)
        print(f"seed {cfg.seed}: {tokens / elapsed:.0f} target tokens/s", file=sys.stderr)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    assert model is not None
    flops = 0  # forward + backward matmul FLOPs of the timed batches
    for index in indices[warmup:]:
        batch = sampler.collate(index).to(device)
        with FlopCounterMode(display=False) as counter:
            loss, aux, _, n = batch_loss(model, batch, cfg.train.label_smoothing)
            ((loss + aux) / n).backward()
        flops += counter.get_total_flops()
        model.zero_grad(set_to_none=True)
    timed_tokens = sum(int((sampler.collate(i).tgt_out != PAD).sum()) for i in indices[warmup:])
    return {"tokens_per_s": tokens_per_s, "sentences_per_s": sentences_per_s, "step_ms": step_ms, "threads": torch.get_num_threads(),
            "flop_per_token": flops / timed_tokens, "gflop_per_step": flops / steps / 1e9, "tokens_per_step": timed_tokens / steps,
            "device": str(device), "precision": "bf16" if cast else "fp32", "peak_rss_mib": peak_rss, "rss_before_training_mib": rss_before}


def _measure_member(cfg: Config, steps: int, warmup: int, runs: int, start_together: Any, results: Any) -> None:
    results.put((cfg.seed, measure(cfg, steps, warmup, runs, start_together.wait)))


def measure_ensemble(cfg: Config, steps: int, warmup: int, runs: int) -> tuple[list[dict[str, Any]], list[float]]:
    """Every model of the ensemble in its own process, timed together -> (each model's `measure`,
    the machine's matmul FLOP/s on all the run's cores before each run, measured while the models wait)."""
    size = cfg.train.ensemble_size
    members = [member_config(cfg, k) for k in range(size)]
    ctx = mp.get_context("spawn")
    start_together, results = ctx.Barrier(size + 1), ctx.Queue()
    procs = [ctx.Process(target=_measure_member, args=(m, steps, warmup, runs, start_together, results)) for m in members]
    for proc in procs:
        proc.start()
    set_threads(sum(m.train.threads for m in members))
    peaks = []
    for _ in range(runs):
        while start_together.n_waiting < size:  # the models are ready (warm-up done): measure the machine alone
            if any(proc.exitcode not in (None, 0) for proc in procs):
                raise SystemExit("a model's benchmark process failed")
            time.sleep(0.05)
        peaks.append(matmul_flops())
        start_together.wait()
    found = dict(results.get() for _ in procs)
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise SystemExit(f"a model's benchmark process failed (exit code {proc.exitcode})")
    return [found[m.seed] for m in members], peaks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, as for nmt.train")
    args = parser.parse_args()

    cfg = compose_train_config(args.overrides)
    if cfg.train.ensemble_size > 1:
        models, peaks = measure_ensemble(cfg, args.steps, args.warmup, args.runs)
    else:
        peaks = []
        on_cpu = resolve_device(cfg.train.device).type == "cpu"  # the machine's rate beside each run, under the same conditions
        models = [measure(cfg, args.steps, args.warmup, args.runs, lambda: peaks.append(matmul_flops()) if on_cpu else None)]
    # per run, the models' tokens/s added up (they ran at the same time); medians over runs
    per_run = [sum(m["tokens_per_s"][r] for m in models) for r in range(args.runs)]
    achieved_per_run = [sum(m["tokens_per_s"][r] * m["flop_per_token"] for m in models) for r in range(args.runs)]
    achieved = statistics.median(achieved_per_run)
    peak = statistics.median(peaks) if peaks else float("nan")
    first = models[0]
    print(json.dumps({
        "overrides": args.overrides, "device": first["device"], "precision": first["precision"], "compile": cfg.train.compile,
        "models": len(models), "threads_per_model": first["threads"], "runs": args.runs, "steps": args.steps,
        "tokens_per_s": round(statistics.median(per_run), 1),
        "tokens_per_s_per_model": [round(statistics.median(m["tokens_per_s"]), 1) for m in models],
        "sentences_per_s": round(statistics.median([sum(m["sentences_per_s"][r] for m in models) for r in range(args.runs)]), 1),
        "step_ms": round(statistics.median([statistics.median(m["step_ms"]) for m in models]), 1),
        "tokens_per_step": round(statistics.mean(m["tokens_per_step"] for m in models), 1),
        "gflop_per_step": round(statistics.mean(m["gflop_per_step"] for m in models), 2), "achieved_gflop_s": round(achieved / 1e9, 2),
        "machine_fp32_matmul_gflop_s": round(peak / 1e9, 1), "machine_threads": sum(m["threads"] for m in models),
        "flop_utilisation": round(achieved / peak, 4),
        "peak_rss_mib": round(max(m["peak_rss_mib"] for m in models), 1),
        "rss_before_training_mib": round(max(m["rss_before_training_mib"] for m in models), 1),
        "machine": machine_description(), "cpu_count": os.cpu_count(), "cpu_bf16_product_speedup": round(cpu_bf16_speedup(), 2),
    }))


if __name__ == "__main__":
    main()
