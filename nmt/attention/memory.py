"""What a batch of sentences offers the attention, prepared once before the decoder loop."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class AttentionMemory:
    """keys: (B, S, *) as the score prepared them (e.g. W2 h_j); values: (B, S, d_h);
    mask: (B, S) True at real tokens. Stochastic normalisers (REINFORCE) append the log-probability
    (B,) and entropy (B,) of each step's sample: the memory lives for one forward pass, so this
    record is explicit per batch, not hidden state on a module."""

    keys: torch.Tensor
    values: torch.Tensor
    mask: torch.Tensor
    log_probs: list[torch.Tensor] = field(default_factory=list)
    entropies: list[torch.Tensor] = field(default_factory=list)
