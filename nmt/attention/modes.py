"""Normalisers: scores (B, S) -> attention weights alpha (B, S) (SPEC equation 4 and modes).

Padding positions always get weight exactly 0.
"""

from __future__ import annotations

import torch
from torch import nn


class Normaliser(nn.Module):
    """Base class: turn the scores of one decoder step into weights over source positions."""

    def forward(self, scores: torch.Tensor, mask: torch.Tensor, query: torch.Tensor, step: int) -> torch.Tensor:
        """scores (B, S), mask (B, S) True at real tokens, query (B, d_s), step i (0-based)
        -> weights (B, S), each row summing to 1 over the unmasked positions."""
        raise NotImplementedError


class SoftNormaliser(Normaliser):
    """alpha_ij = exp(e_ij) / sum_k exp(e_ik), padding masked (Bahdanau/Luong soft attention)."""

    def forward(self, scores: torch.Tensor, mask: torch.Tensor, query: torch.Tensor, step: int) -> torch.Tensor:
        return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
