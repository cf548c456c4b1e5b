"""Bidirectional RNN encoder over packed sequences."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmt.attention.self_attention import SelfAttentionLayer
from nmt.model.dropout import Dropout

RNN_CLASSES: dict[str, type[nn.GRU] | type[nn.LSTM]] = {"gru": nn.GRU, "lstm": nn.LSTM}


class Encoder(nn.Module):
    """Bidirectional GRU/LSTM: annotations h_j = [fwd_j; bwd_j] of size 2 * hidden_size,
    optionally followed by a self-attention layer over them."""

    def __init__(
        self, input_size: int, hidden_size: int, layers: int, cell: str, dropout: float,
        self_attention: SelfAttentionLayer | None = None,
    ) -> None:
        super().__init__()
        self.rnn = RNN_CLASSES[cell](
            input_size, hidden_size, num_layers=layers, batch_first=True,
            bidirectional=True, dropout=dropout if layers > 1 else 0.0,
        )
        self.dropout = Dropout(dropout)
        self.output_size = 2 * hidden_size
        self.self_attention = self_attention

    def forward(self, embedded: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """embedded (B, S, E), lengths (B,) -> states h (B, S, 2H) (zero at padding),
        final (B, 2H) = [last forward state; first backward state] of the top layer."""
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, last = self.rnn(packed)
        states, _ = pad_packed_sequence(out, batch_first=True, total_length=embedded.size(1))
        h_n = last[0] if isinstance(last, tuple) else last  # LSTM returns (h_n, c_n)
        final = torch.cat([h_n[-2], h_n[-1]], dim=-1)  # top layer: forward, backward
        states = self.dropout(states)
        if self.self_attention is not None:
            mask = torch.arange(states.size(1), device=states.device).unsqueeze(0) < lengths.to(states.device).unsqueeze(1)
            states, _ = self.self_attention(states, mask)
        return states, final
