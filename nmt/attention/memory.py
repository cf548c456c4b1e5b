"""What a batch of sentences offers the attention, prepared once before the decoder loop."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class AttentionMemory:
    """keys: (B, S, *) as the score prepared them (e.g. W2 h_j); values: (B, S, d_h);
    mask: (B, S) True at real tokens. Stochastic normalisers (REINFORCE) append the log-probability
    (B,) and entropy (B,) of each step's sample; with coverage, `coverage` (B, S) holds the sum of
    past weights and `coverage_losses` each step's sum_j min(alpha_ij, C_ij) (B,). The memory lives
    for one forward pass, so this record is explicit per batch, not hidden state on a module."""

    keys: torch.Tensor
    values: torch.Tensor
    mask: torch.Tensor
    log_probs: list[torch.Tensor] = field(default_factory=list)
    entropies: list[torch.Tensor] = field(default_factory=list)
    coverage: torch.Tensor | None = None
    coverage_losses: list[torch.Tensor] = field(default_factory=list)
