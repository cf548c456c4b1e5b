"""Averaged weights: an exponential moving average kept during training (Polyak averaging;
`train.ema_decay`), and the average of several checkpoints of one run (`average_checkpoints`).
Both usually translate better than the last weights, at no cost in training."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from nmt.model.checkpoint import Checkpoint, load_checkpoint
from nmt.system.errors import UserError


class ParameterAverage:
    """shadow <- d shadow + (1 - d) parameter after every optimiser step, with the decay warmed up
    as d_t = min(decay, (1 + t) / (10 + t)) so that early shadows are not stuck at the random start."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        self.shadow = {name: p.detach().clone() for name, p in model.named_parameters()}

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        d = min(self.decay, (1 + self.updates) / (10 + self.updates))
        for name, p in model.named_parameters():
            self.shadow[name].mul_(d).add_(p.detach(), alpha=1 - d)
        self.updates += 1

    @contextlib.contextmanager
    def swapped_into(self, model: nn.Module) -> Iterator[None]:
        """The model holds the averaged weights inside the block, its own weights again after it."""
        saved = {name: p.detach().clone() for name, p in model.named_parameters()}
        copy_into(model, self.shadow)
        try:
            yield
        finally:
            copy_into(model, saved)

    def state(self) -> dict[str, torch.Tensor]:
        return {**{name: t.clone() for name, t in self.shadow.items()}, "__updates__": torch.tensor(self.updates)}

    def restore(self, state: dict[str, torch.Tensor]) -> None:
        self.updates = int(state["__updates__"])
        for name, tensor in self.shadow.items():
            tensor.copy_(state[name])


@torch.no_grad()
def copy_into(model: nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Copy named parameter values into a model (names it does not have are ignored)."""
    for name, p in model.named_parameters():
        if name in weights:
            p.copy_(weights[name])


def average_checkpoints(paths: list[Path]) -> Checkpoint:
    """The mean of the weights (the averaged ones where a checkpoint has them) of checkpoints of
    one model: same config, same subword models -> a checkpoint to evaluate or translate with
    (no training state: it starts no resumed run)."""
    if not paths:
        raise UserError("no checkpoints to average")
    loaded = [load_checkpoint(p) for p in paths]
    first = loaded[0]
    for path, ckpt in zip(paths[1:], loaded[1:]):
        if ckpt.config.get("model") != first.config.get("model") or not torch.equal(ckpt.src_spm, first.src_spm):
            raise UserError(f"{path}: not the same model as {paths[0]} (model config or subword vocabulary differs)")
    weights = [c.evaluated_weights() for c in loaded]
    model = {name: torch.stack([w[name].double() for w in weights]).mean(0).to(weights[0][name].dtype) for name in weights[0]}
    return Checkpoint(model=model, config=first.config, src_spm=first.src_spm, tgt_spm=first.tgt_spm,
                      step=max(c.step for c in loaded), epoch=max(c.epoch for c in loaded), n_params=first.n_params)

