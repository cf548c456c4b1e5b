"""Process-level set-up: seeds, thread counts, device choice."""

from __future__ import annotations

import ctypes
import os
import platform
import random
import sys

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
    """Whether this CPU has bf16 matrix instructions (AVX512-BF16 or AMX-BF16), where bf16 autocast
    makes training's products faster; elsewhere it only adds casts."""
    capabilities = getattr(torch.cpu, "get_capabilities", None)  # torch >= 2.9
    if capabilities is None:
        return False
    found = capabilities()
    return bool(found.get("avx512_bf16") or found.get("amx_bf16"))


def autocast_dtype(precision: str, device: torch.device, *, native_cpu_bf16: bool = False) -> torch.dtype | None:
    """The autocast dtype of `train.precision` or `decode.precision` on `device` (None: plain fp32).
    `auto` is bf16 on CUDA (tensor cores) and fp32 on CPU; with `native_cpu_bf16` (training), bf16
    also on a CPU that multiplies bf16 natively (`cpu_multiplies_bf16`): 18% more steps in 15
    minutes on an AVX512-BF16 EPYC at equal BLEU (docs/performance.md)."""
    if precision == "auto":
        native = device.type == "cuda" or (native_cpu_bf16 and device.type == "cpu" and cpu_multiplies_bf16())
        precision = "bf16" if native else "fp32"
    return {"fp32": None, "bf16": torch.bfloat16}[precision]


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
