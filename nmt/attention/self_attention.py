"""Self-attention over a sequence (the first seed): Q = W_Q X, K = W_K X, V = W_V X,
h_i = x_i + att((K, V), q_i), with any of the five scores; used as an optional encoder layer."""

from __future__ import annotations

import torch
from torch import nn

from nmt.attention.modes import masked_softmax
from nmt.attention.scores import AttentionScore
from nmt.model.dropout import Dropout


class SelfAttentionLayer(nn.Module):
    """Soft self-attention with a residual connection; padding neither attends nor is attended."""

    def __init__(self, size: int, score: AttentionScore, dropout: float) -> None:
        super().__init__()
        self.W_Q = nn.Linear(size, size, bias=False)
        self.W_K = nn.Linear(size, size, bias=False)
        self.W_V = nn.Linear(size, size, bias=False)
        self.score = score
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, S, d), mask (B, S) True at real tokens -> h (B, S, d) (0 at padding), weights (B, S, S)."""
        queries = self.W_Q(x)
        keys = self.score.prepare(self.W_K(x))
        weights = masked_softmax(self.score(queries, keys), mask.unsqueeze(1))  # (B, S_q, S_k)
        h = x + self.dropout(torch.bmm(weights, self.W_V(x)))
        return h * mask.unsqueeze(2).to(h.dtype), weights
