#!/usr/bin/env python
"""Where the time of one training step goes: torch.profiler over a few steps of a config
(Hydra overrides, default: the main job), grouped by operator and by phase (forward,
backward, optimiser). Prints a Markdown table; docs/performance.md quotes it.

    python scripts/bench/profile_step.py [--steps 5] [overrides ...]
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from nmt.data.batching import BatchSampler
from nmt.data.prepare import prepare
from nmt.model.build import build_model
from nmt.system.cli import compose_train_config
from nmt.system.runtime import configure_allocator, seed_everything, set_threads
from nmt.training.step import batch_loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--shapes", action="store_true", help="also break the matrix products down by input shapes")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    cfg = compose_train_config(args.overrides)
    seed_everything(cfg.seed)
    configure_allocator()
    set_threads(cfg.train.threads)
    data = prepare(cfg.data)
    sampler = BatchSampler(data.split("train"), cfg.data.batch_tokens, True, cfg.seed, cfg.data.batch_sentences)
    # batches of the typical (median) size, so the profile is of an ordinary step
    batches = sorted(sampler.batches(0)[:60], key=len)[20 : 20 + 3 + args.steps]
    model = build_model(cfg.model, len(data.src_tokenizer), len(data.tgt_tokenizer)).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.train.lr)

    def step(index: object, profiled: bool) -> int:
        batch = sampler.collate(index)  # type: ignore[arg-type]
        with record_function("## forward + loss"):
            loss, aux, _, n = batch_loss(model, batch, cfg.train.label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        with record_function("## backward"):
            ((loss + aux) / n).backward()
        with record_function("## clip + optimiser"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.train.clip_grad_norm)
            optimizer.step()
        return n

    for index in batches[:3]:
        step(index, False)
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=args.shapes, with_flops=args.shapes) as prof:
        tokens = sum(step(index, True) for index in batches[3:])
    wall = (time.perf_counter() - start) / args.steps
    events = prof.key_averages()
    phases = [e for e in events if e.key.startswith("## ")]
    total = sum(e.cpu_time_total for e in phases)
    print(f"{args.steps} steps, {tokens / args.steps:.0f} target tokens per step, {1000 * wall:.0f} ms per step "
          f"(profiled; {torch.get_num_threads()} threads)\n")
    print("| phase | ms/step | share |\n|---|---|---|")
    for e in sorted(phases, key=lambda e: -e.cpu_time_total):
        print(f"| {e.key[3:]} | {e.cpu_time_total / 1000 / args.steps:.0f} | {e.cpu_time_total / total:.0%} |")
    print("\n| operator (self time) | ms/step | share | calls/step |\n|---|---|---|---|")
    ops = sorted((e for e in events if not e.key.startswith("## ")), key=lambda e: -e.self_cpu_time_total)[: args.top]
    for e in ops:
        ms, share = e.self_cpu_time_total / 1000 / args.steps, e.self_cpu_time_total / total
        print(f"| `{e.key}` | {ms:.1f} | {share:.1%} | {e.count // args.steps} |")
    if args.shapes:
        print("\n| matrix product | input shapes | ms/step | calls/step | GFLOP/s |\n|---|---|---|---|---|")
        products = [e for e in prof.key_averages(group_by_input_shape=True) if e.key in ("aten::mm", "aten::addmm", "aten::bmm")]
        for e in sorted(products, key=lambda e: -e.self_cpu_time_total)[: args.top]:
            ms = e.self_cpu_time_total / 1000 / args.steps
            rate = e.flops / e.self_cpu_time_total / 1e3 if e.flops else float("nan")  # flops per microsecond / 1e3
            print(f"| `{e.key}` | {e.input_shapes} | {ms:.1f} | {e.count // args.steps} | {rate:.0f} |")


if __name__ == "__main__":
    main()
