#!/usr/bin/env python
"""GPU path check: the same training steps on CPU and on CUDA (fp32 and bf16 autocast) must
agree, and CUDA throughput is reported. One short run; prints one JSON line and exits non-zero
when a check fails.

    python scripts/bench/check_gpu.py [--steps 20] [--device cuda]

Uses a generated toy corpus (no downloads) and the default model size. Checks:
- `resolve_device("auto")` picks CUDA and `train.precision=auto` means bf16 there;
- per-step losses of CUDA fp32 match CPU fp32 (relative 1e-3: cuBLAS sums in another order);
- per-step losses of CUDA bf16 stay within 3% of fp32 and training lowers the loss.
Without a GPU it runs the CPU side only and says so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time

import torch

from nmt.config.schema import CorpusSource, DataConfig, ModelConfig, SubwordModel, ToyTask
from nmt.data.batching import BatchSampler
from nmt.data.prepare import prepare
from nmt.model.build import build_model
from nmt.system.runtime import precision_dtype, resolve_device, seed_everything
from nmt.training.step import train_step


def losses(device: torch.device, precision: str, batches: list, vocab: int, steps: int) -> tuple[list[float], float]:
    """Train a fresh default-size model for `steps` -> (per-step mean losses, target tokens/s)."""
    seed_everything(0)
    cfg = ModelConfig(embedding_dropout=0.0, word_dropout=0.0)  # the default size; no dropout, so devices draw no different masks
    cfg.encoder.dropout = cfg.decoder.dropout = 0.0
    model = build_model(cfg, vocab, vocab).to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    cast = precision_dtype(precision, device, lambda: False)  # CPU: fp32 unless forced
    out, tokens, elapsed = [], 0, 0.0
    for k in range(steps):
        batch = batches[k % len(batches)].to(device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        result = train_step(model, optimizer, batch, 0.1, 1.0, None, cast)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if k >= 3:  # after warm-up (CUDA context, cuBLAS plans)
            elapsed += time.perf_counter() - start
            tokens += result.tokens
        out.append(result.loss / result.tokens)
    return out, tokens / max(elapsed, 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        cfg = DataConfig(name="toy_reverse", source=CorpusSource.toy, dir=f"{tmp}/toy", cache_dir=f"{tmp}/prepared",
                         vocab_size=200, subword_model=SubwordModel.word, batch_tokens=4000)
        cfg.toy.task, cfg.toy.n_train, cfg.toy.max_len = ToyTask.reverse, 3000, 30
        data = prepare(cfg)
        sampler = BatchSampler(data.split("train"), cfg.batch_tokens, shuffle=True, seed=0)
        batches = [sampler.collate(i) for i in sampler.batches(0)]
        vocab = len(data.tgt_tokenizer)

    device = resolve_device(args.device)
    report: dict[str, object] = {"device": str(device), "cuda_available": torch.cuda.is_available()}
    failures = []
    cpu_fp32, cpu_speed = losses(torch.device("cpu"), "fp32", batches, vocab, args.steps)
    report.update(cpu_fp32_tokens_per_s=round(cpu_speed, 1), cpu_first_last_loss=[round(cpu_fp32[0], 4), round(cpu_fp32[-1], 4)])
    if device.type != "cuda":
        report["note"] = "no CUDA device: only the CPU side ran"
    else:
        report["gpu"] = torch.cuda.get_device_name(device)
        if precision_dtype("auto", device, lambda: False) != torch.bfloat16:
            failures.append("precision=auto is not bf16 on CUDA")
        gpu_fp32, fp32_speed = losses(device, "fp32", batches, vocab, args.steps)
        gpu_bf16, bf16_speed = losses(device, "bf16", batches, vocab, args.steps)
        rel32 = max(abs(a - b) / abs(b) for a, b in zip(gpu_fp32, cpu_fp32))
        rel16 = max(abs(a - b) / abs(b) for a, b in zip(gpu_bf16, gpu_fp32))
        report.update(
            cuda_fp32_tokens_per_s=round(fp32_speed, 1), cuda_bf16_tokens_per_s=round(bf16_speed, 1),
            max_rel_diff_cuda_fp32_vs_cpu=rel32, max_rel_diff_bf16_vs_fp32=rel16,
            bf16_first_last_loss=[round(gpu_bf16[0], 4), round(gpu_bf16[-1], 4)],
            peak_cuda_memory_mib=round(torch.cuda.max_memory_allocated(device) / 2**20, 1),
        )
        if rel32 > 1e-3:
            failures.append(f"CUDA fp32 losses differ from CPU by {rel32:.2e} (> 1e-3)")
        if rel16 > 0.03:
            failures.append(f"bf16 losses differ from fp32 by {rel16:.2%} (> 3%)")
        if not statistics.mean(gpu_bf16[-5:]) < statistics.mean(gpu_bf16[:5]):
            failures.append("bf16 training did not lower the loss")
    report["failures"] = failures
    print(json.dumps(report))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
