"""Recurrent cells for the decoder's step loop, taking pre-projected inputs.

The decoder computes the input-side gate pre-activations of all target embeddings in one matmul
before the loop; these cells then only add the context and hidden projections per step. The math
is exactly torch's GRUCell / LSTMCell on the concatenated input [E y_{i-1}; c_i].
"""

from __future__ import annotations

import torch
from torch import nn

State = tuple[torch.Tensor, ...]


class GRUStep(nn.Module):
    """GRU: r, z, n gates; the state is (s,)."""

    gates = 3
    state_parts = 1

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.hidden = nn.Linear(hidden_size, 3 * hidden_size)

    def forward(self, gates_in: torch.Tensor, state: State) -> State:
        """gates_in (B, 3H) input pre-activations, state (s (B, H),) -> new state."""
        (s,) = state
        gh = self.hidden(s)
        i_r, i_z, i_n = gates_in.chunk(3, dim=1)
        h_r, h_z, h_n = gh.chunk(3, dim=1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return (n + z * (s - n),)


class LSTMStep(nn.Module):
    """LSTM: i, f, g, o gates; the state is (s, cell)."""

    gates = 4
    state_parts = 2

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.hidden = nn.Linear(hidden_size, 4 * hidden_size)

    def forward(self, gates_in: torch.Tensor, state: State) -> State:
        """gates_in (B, 4H), state (s (B, H), cell (B, H)) -> new state."""
        s, cell = state
        gh = self.hidden(s)
        i, f, g, o = (gates_in + gh).chunk(4, dim=1)
        cell = torch.sigmoid(f) * cell + torch.sigmoid(i) * torch.tanh(g)
        return (torch.sigmoid(o) * torch.tanh(cell), cell)


CELLS: dict[str, type[GRUStep] | type[LSTMStep]] = {"gru": GRUStep, "lstm": LSTMStep}
