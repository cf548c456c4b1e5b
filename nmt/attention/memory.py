"""What a batch of sentences offers the attention, prepared once before the decoder loop."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

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

    def _map_rows(self, rows: torch.Tensor) -> AttentionMemory:
        # Every per-sentence tensor field, whatever its name, follows the rows: a field added to the
        # memory later is repeated and selected by the search without being taught to it.
        # The per-step training records (lists) belong to one forward pass and are not carried.
        changes: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor):
                changes[f.name] = value.index_select(0, rows)
            elif isinstance(value, list):
                changes[f.name] = []
        return replace(self, **changes)

    @property
    def per_hypothesis(self) -> bool:
        """Whether a row holds state of its own hypothesis (coverage), not only of its sentence:
        then a search must select rows at every step, not only when sentences leave."""
        return self.coverage is not None

    def repeat_rows(self, k: int) -> AttentionMemory:
        """Each sentence's memory k times (B -> B*k), the copies of a sentence adjacent (beams)."""
        return self._map_rows(torch.arange(self.mask.size(0), device=self.mask.device).repeat_interleave(k))

    def select_rows(self, rows: torch.Tensor) -> AttentionMemory:
        """The memory of the rows `rows` (R,) (e.g. the surviving beams), in that order."""
        return self._map_rows(rows)
