"""Process-level set-up: seeds, thread counts, device choice."""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from typing import Literal

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed Python, numpy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def set_threads(threads: int) -> None:
    """Use `threads` intra-op threads (0: one per available core)."""
    n = threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(n)


def resolve_device(name: str) -> torch.device:
    """`auto` -> CUDA when present, else CPU; otherwise the named device."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def configure_allocator() -> None:
    """Keep freed memory in the process (glibc): no mmap for large blocks, no trimming.

    A training step allocates tensors of tens of MB (tokens x vocabulary); glibc serves those with
    fresh mmaps, so every step pays page faults on first touch (a sixth of the step on CPU).
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (e.g. musl): nothing to tune
        return
    m_trim_threshold, m_mmap_max = -1, -4
    libc.mallopt(m_mmap_max, 0)
    libc.mallopt(m_trim_threshold, 1 << 30)


def cpu_multiplies_bf16() -> bool:
    """Whether this CPU has bf16 matrix instructions (AVX512-BF16 or AMX-BF16); without them bf16
    autocast only adds casts."""
    capabilities = getattr(torch.cpu, "get_capabilities", None)  # torch >= 2.9
    if capabilities is None:
        return False
    found = capabilities()
    return bool(found.get("avx512_bf16") or found.get("amx_bf16"))


# Products of the shapes a training step is made of (default model, 1,000-token batches): the
# decoder's per-step recurrent gates (about 64 rows), a layer over all target tokens, and the
# vocabulary projection; (rows, inner, columns). bench_train.py reports their bf16/fp32 ratio;
# training's auto times the whole step instead (nmt.training.precision).
STEP_PRODUCTS = ((64, 512, 1536), (1000, 768, 512), (1000, 256, 8000))
# Those of a decoding step of the default model: the recurrent gates and the vocabulary projection
# of 64 sentences searched greedily (64 rows) and with beam 5 (320 rows).
DECODE_PRODUCTS = ((64, 512, 1536), (64, 256, 8000), (320, 512, 1536), (320, 256, 8000))
# decode.precision=auto takes bf16 on a CPU whose bf16 products of a decoding step time at least
# this much faster than fp32: the products are about two thirds of a search's time, so it then
# runs about 1.5x faster or more, casts included.
CPU_BF16_MIN_SPEEDUP = 2.0

Shapes = tuple[tuple[int, int, int], ...]


def _product_seconds(dtype: torch.dtype, repeats: int, shapes: Shapes = STEP_PRODUCTS) -> float:
    """The fastest of `repeats` passes over `shapes` (rows, inner, columns), the activations cast
    to `dtype` inside the pass as autocast casts them (the weights once, as autocast caches them)."""
    gen = torch.Generator().manual_seed(0)
    pairs = [(torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen).to(dtype)) for m, k, n in shapes]
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for a, b in pairs:
            torch.mm(a.to(dtype), b)
        best = min(best, time.perf_counter() - start)
    return best


@functools.cache
def cpu_bf16_speedup(repeats: int = 6, shapes: Shapes = STEP_PRODUCTS) -> float:
    """How much faster this CPU multiplies the products `shapes` (default: a training step's) in
    bf16 than in fp32 (fp32 time / bf16 time, the best of `repeats` interleaved passes; under half
    a second). 0 when the CPU has no bf16 instructions (`cpu_multiplies_bf16`). The flags alone
    do not say whether bf16 pays: an Intel Xeon with AVX512-BF16 trained 59% slower in bf16, an
    AMD EPYC with it 18% faster (docs/performance.md); bench_train.py reports this ratio. Once per
    process and shapes."""
    if not cpu_multiplies_bf16():
        return 0.0
    _product_seconds(torch.bfloat16, 1, shapes)  # first calls create the kernels
    _product_seconds(torch.float32, 1, shapes)
    fp32, bf16 = float("inf"), float("inf")
    for _ in range(3):  # interleaved, so that a slow moment of the host does not decide alone
        fp32 = min(fp32, _product_seconds(torch.float32, repeats // 3 or 1, shapes))
        bf16 = min(bf16, _product_seconds(torch.bfloat16, repeats // 3 or 1, shapes))
    return fp32 / bf16


def cpu_decodes_faster_in_bf16() -> bool:
    """Whether decode.precision=auto takes bf16 on this CPU: its bf16 products of a decoding step
    measure at least CPU_BF16_MIN_SPEEDUP times as fast as fp32 (measured once per process)."""
    return cpu_bf16_speedup(shapes=DECODE_PRODUCTS) >= CPU_BF16_MIN_SPEEDUP


def precision_dtype(precision: str, device: torch.device, cpu_bf16_pays: Callable[[], bool]) -> torch.dtype | None:
    """The autocast dtype of a `precision` setting (None: plain fp32). `auto` is bf16 on CUDA
    (tensor cores), and on a CPU where `cpu_bf16_pays()` (asked only then); `bf16` and `fp32`
    force it."""
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" or cpu_bf16_pays() else "fp32"
    return {"fp32": None, "bf16": torch.bfloat16}[precision]


Use = Literal["decode", "align"]
# What `precision=auto` means on a CPU for the uses that are searches (training's rule times the
# model's own step: nmt.training.precision). Decoding takes bf16 where this CPU multiplies a
# decoding step's products much faster: the attention block itself stays fp32 under autocast
# (nmt.attention.block.full_precision). The alignment of free translations (`make align`) stays
# fp32: there the attention is the product, and its searches are few.
CPU_AUTO_BF16: dict[Use, Callable[[], bool]] = {
    "decode": cpu_decodes_faster_in_bf16,
    "align": lambda: False,
}


def autocast_dtype(precision: str, device: torch.device, use: Use) -> torch.dtype | None:
    """The autocast dtype of decode.precision for `use` on `device` (None: plain fp32): `auto` as
    `precision_dtype` and CPU_AUTO_BF16 say."""
    return precision_dtype(precision, device, CPU_AUTO_BF16[use])


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), else what `platform` knows, e.g. "AMD EPYC"."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # not Linux
        pass
    return platform.processor() or platform.machine()


def machine_description() -> str:
    """The CPU's model name, the cores this process may use and torch's threads, e.g. "AMD EPYC,
    2 cores, 2 threads": benchmark figures mean little without it (cloud machines of one size
    differ in CPU from one start to the next)."""
    return f"{cpu_model()}, {len(os.sched_getaffinity(0))} cores, {torch.get_num_threads()} threads"
