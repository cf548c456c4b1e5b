"""The attention block att((K, V), q): a score and a normaliser composed; returns (context, weights)."""

from __future__ import annotations

import torch
from torch import nn

from nmt.attention.memory import AttentionMemory
from nmt.attention.modes import Normaliser
from nmt.attention.scores import AttentionScore

__all__ = ["Attention", "AttentionMemory"]


class Attention(nn.Module):
    """att((K, V), q) = sum_j alpha_j v_j with alpha = normaliser(score(q, k_j))."""

    def __init__(self, score: AttentionScore, normaliser: Normaliser) -> None:
        super().__init__()
        self.score = score
        self.normaliser = normaliser

    def memory(self, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor) -> AttentionMemory:
        """keys (B, S, d_k), values (B, S, d_h), mask (B, S) -> memory for `forward`."""
        return AttentionMemory(self.score.prepare(keys), values, mask)

    def forward(self, query: torch.Tensor, memory: AttentionMemory, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """query (B, d_s) at decoder step `step` -> context (B, d_h), weights (B, S)."""
        scores = self.score(query, memory.keys)
        weights = self.normaliser(scores, memory, query, step)
        context = torch.bmm(weights.unsqueeze(1), memory.values).squeeze(1)
        return context, weights

    def auxiliary_loss(self, memory: AttentionMemory, reward: torch.Tensor, valid: torch.Tensor) -> torch.Tensor | None:
        """The normaliser's own training loss (REINFORCE's score-function term), or None.
        reward (B,) per sentence, valid (B, T) real target steps."""
        return self.normaliser.auxiliary_loss(memory, reward, valid)
