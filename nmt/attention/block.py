"""The attention block att((K, V), q): a score and a normaliser composed; returns (context, weights)."""

from __future__ import annotations

import torch
from torch import nn

from nmt.attention.memory import AttentionMemory
from nmt.attention.modes import Normaliser
from nmt.attention.scores import AttentionScore

__all__ = ["Attention", "AttentionMemory"]


def full_precision(device_type: str) -> torch.autocast:
    """Autocast off: the attention's scores, weights and context are computed in at least fp32
    even when the rest of the model runs its products in bf16 (train.precision=bf16). The block is
    what this tool exists to show, and its products are a small share of a step's time; in bf16
    a toy copy model learned to translate before its attention became the alignment (AER 0.52
    against 0.003 in fp32, docs/performance.md)."""
    return torch.autocast(device_type, enabled=False)


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """x in float32 if it is a lower-precision float (bf16/fp16 from autocast); float64 stays."""
    return x.float() if x.is_floating_point() and x.dtype not in (torch.float32, torch.float64) else x


class CoverageTerm(nn.Module):
    """The coverage feature added to any score: e_ij += v_c^T tanh(w_c C_ij + b_c), C_ij = sum_{k<i} alpha_kj."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.w_c = nn.Linear(1, hidden_size)
        self.v_c = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, coverage: torch.Tensor) -> torch.Tensor:
        """coverage (B, S) -> score term (B, S)."""
        return self.v_c(torch.tanh(self.w_c(coverage.unsqueeze(2)))).squeeze(2)


class Attention(nn.Module):
    """att((K, V), q) = sum_j alpha_j v_j with alpha = normaliser(score(q, k_j) [+ coverage term])."""

    def __init__(
        self, score: AttentionScore, normaliser: Normaliser,
        coverage: CoverageTerm | None = None, coverage_loss_weight: float = 0.0,
    ) -> None:
        super().__init__()
        self.score = score
        self.normaliser = normaliser
        self.coverage = coverage
        self.coverage_loss_weight = coverage_loss_weight

    def memory(self, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor) -> AttentionMemory:
        """keys (B, S, d_k), values (B, S, d_h), mask (B, S) -> memory for `forward`, its
        tensors in at least fp32 (see `full_precision`)."""
        with full_precision(keys.device.type):
            memory = AttentionMemory(self.score.prepare(at_least_fp32(keys)), at_least_fp32(values), mask)
        if self.coverage is not None:
            memory.coverage = memory.values.new_zeros(mask.shape)  # the (fp32) values' dtype, not the caller's
        return memory

    def forward(self, query: torch.Tensor, memory: AttentionMemory, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """query s (B, d_s) at decoder step i = `step` -> context c_i (B, d_h), weights alpha_i. (B, S),
        both in at least fp32 whatever the autocast around (see `full_precision`)."""
        with full_precision(query.device.type):
            return self._attend(at_least_fp32(query), memory, step)

    def _attend(self, query: torch.Tensor, memory: AttentionMemory, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        scores = self.score(query, memory.keys)  # e_ij = a(s, h_j)                    (5)
        if self.coverage is not None and memory.coverage is not None:
            scores = scores + self.coverage(memory.coverage)
        weights = self.normaliser(scores, memory, query, step)  # alpha_ij = normalise(e_i.)   (4)
        if memory.coverage is not None:
            memory.coverage_losses.append(torch.minimum(weights, memory.coverage).sum(1))
            memory.coverage = memory.coverage + weights
        context = torch.bmm(weights.unsqueeze(1), memory.values).squeeze(1)  # c_i = sum_j alpha_ij h_j   (3)
        return context, weights

    def auxiliary_loss(self, memory: AttentionMemory, reward: torch.Tensor, valid: torch.Tensor) -> torch.Tensor | None:
        """Extra training losses of the block, summed over real target steps, or None: the
        normaliser's own (REINFORCE's score-function term) and the coverage penalty.
        reward (B,) per sentence, valid (B, T) real target steps."""
        losses = []
        own = self.normaliser.auxiliary_loss(memory, reward, valid)
        if own is not None:
            losses.append(own)
        if memory.coverage_losses and self.coverage_loss_weight:
            per_step = torch.stack(memory.coverage_losses, 1)  # (B, T)
            losses.append(self.coverage_loss_weight * (per_step * valid.to(per_step.dtype)).sum())
        return sum(losses[1:], losses[0]) if losses else None
