"""Multi-process data-parallel training (`torchrun --nproc_per_node=N -m nmt.train ...`).

torchrun sets `RANK`, `LOCAL_RANK` and `WORLD_SIZE`; every process builds the same model from the
same seed, trains on its own share of each epoch's batches, and DistributedDataParallel averages
the gradients, so the replicas stay identical. Rank 0 alone validates and writes (logs,
checkpoints, TensorBoard) and shares its decisions (validation BLEU, stop) with the others.
With `WORLD_SIZE` unset everything here is a no-op for a single process.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

T = TypeVar("T")


@dataclass(frozen=True)
class World:
    """This process's place among the training processes."""

    rank: int = 0
    local_rank: int = 0
    size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


def env_rank() -> int:
    """The global rank torchrun gave this process (0 when not launched by torchrun)."""
    return int(os.environ.get("RANK", "0"))


def init_world(device: torch.device) -> World:
    """Join the process group torchrun describes (gloo on CPU, NCCL on CUDA); -> this process's World."""
    size = int(os.environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return World()
    world = World(rank=env_rank(), local_rank=int(os.environ.get("LOCAL_RANK", "0")), size=size)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return world


def local_device(device: torch.device, world: World) -> torch.device:
    """One GPU per process: `cuda` becomes `cuda:{local_rank}`."""
    if device.type == "cuda" and world.distributed:
        torch.cuda.set_device(world.local_rank)
        return torch.device("cuda", world.local_rank)
    return device


def shard(batches: list[T], world: World) -> list[T]:
    """This rank's share of an epoch's batches: every rank gets the same number (the remainder,
    fewer than `world.size` batches, is left out) so that the ranks step in lockstep."""
    if not world.distributed:
        return batches
    usable = len(batches) - len(batches) % world.size
    return batches[world.rank : usable : world.size]


def barrier(world: World) -> None:
    if world.distributed:
        dist.barrier()


def from_main(compute: Callable[[], T], world: World) -> T:
    """`compute()` run on rank 0 alone, its result (any picklable object) handed to every rank."""
    if not world.distributed:
        return compute()
    box: list[Any] = [compute() if world.is_main else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def shard_size(n_batches: int, world: World) -> int:
    """How many of an epoch's `n_batches` batches each rank trains on (as `shard` hands them out)."""
    return (n_batches - n_batches % world.size) // world.size if world.distributed else n_batches


def _all_max(t: torch.Tensor) -> torch.Tensor:
    """The element-wise max of `t` over the ranks (NCCL reduces CUDA tensors only: a CPU value travels through the GPU)."""
    moved = t.cuda() if dist.get_backend() == "nccl" else t
    dist.all_reduce(moved, op=dist.ReduceOp.MAX)
    return moved.cpu()


def any_rank(flag: bool, world: World) -> bool:
    """True on every rank when `flag` is true on at least one (e.g. a non-finite loss)."""
    if not world.distributed:
        return flag
    return bool(_all_max(torch.tensor([int(flag)], dtype=torch.int32)).item())


def longest(value: float, world: World) -> float:
    """The largest of every rank's `value`, on every rank: one clock for all (e.g. the elapsed
    seconds a wall-clock schedule reads, which would otherwise differ between replicas)."""
    if not world.distributed:
        return value
    return float(_all_max(torch.tensor([value], dtype=torch.float64)).item())


def parameter_digest(model: torch.nn.Module) -> str:
    """SHA-1 of every parameter's bytes: equal digests mean bit-identical replicas."""
    h = hashlib.sha1()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().float().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def gather_objects(value: T, world: World) -> list[T]:
    """Every rank's `value`, in rank order, on every rank (`[value]` for a single process)."""
    if not world.distributed:
        return [value]
    out: list[Any] = [None] * world.size
    dist.all_gather_object(out, value)
    return out


def gather_digests(model: torch.nn.Module, world: World) -> list[str]:
    """Every rank's `parameter_digest`, in rank order."""
    return gather_objects(parameter_digest(model), world)


def shutdown(world: World) -> None:
    if world.distributed and dist.is_initialized():
        dist.destroy_process_group()
