"""The attention decoder: equations 1-5 of Bahdanau, Cho and Bengio (2015), "Neural Machine
Translation by Jointly Learning to Align and Translate", in their order by default.

At step i (attend_from=previous):
  e_ij = a(s_{i-1}, h_j)                 (5)   score from the PREVIOUS state
  alpha_ij = normalise(e_i.)             (4)
  c_i = sum_j alpha_ij h_j               (3)
  s_i = f(s_{i-1}, y_{i-1}, c_i)         (2)   GRU/LSTM cell on [E y_{i-1}; c_i]
  p(y_i | .) = g(y_{i-1}, s_i, c_i)      (1)   deep output: W_o tanh(U [s_i; E y_{i-1}; c_i])
With attend_from=current (Luong), s_i = f(s_{i-1}, [E y_{i-1}; c_{i-1}]) first, then e_ij = a(s_i, h_j).

Everything that does not depend on the previous step is hoisted out of the step loop: the
input-side gate projections of all target embeddings, the attention keys (prepared once per
sentence), and the output layer g with the vocabulary projection over all steps at once.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from nmt.attention.block import Attention, AttentionMemory
from nmt.model.cells import CELLS, State
from nmt.model.deferred_grads import deferred_weight_grads
from nmt.model.dropout import Dropout, WordDropout


class Decoder(nn.Module):
    """RNN decoder with attention; returns logits and the alignment (attention) matrices."""

    defer_weight_grads = True  # nmt.model.deferred_grads in training (False: autograd's per-step weight gradients; for ablations)

    def __init__(
        self,
        embedding: nn.Embedding,
        hidden_size: int,
        context_size: int,
        encoder_final_size: int,
        output_size: int,
        cell: str,
        attention: Attention,
        attend_previous: bool,
        dropout: float,
        embedding_dropout: float,
        word_dropout: float,
        tie_embeddings: bool,
    ) -> None:
        super().__init__()
        vocab_size, emb_size = embedding.weight.shape
        self.embedding = embedding
        self.attention = attention
        self.attend_previous = attend_previous
        self.cell = CELLS[cell](hidden_size)
        gate_size = self.cell.gates * hidden_size
        self.embed_gates = nn.Linear(emb_size, gate_size)  # W_ih on E y, with the input bias
        self.context_gates = nn.Linear(context_size, gate_size, bias=False)  # W_ih on c
        self.bridge = nn.Linear(encoder_final_size, self.cell.state_parts * hidden_size)
        self.readout = nn.Linear(hidden_size + emb_size + context_size, output_size)
        self.generator = nn.Linear(output_size, vocab_size, bias=False)
        if tie_embeddings:
            self.generator.weight = embedding.weight
        self.embedding_dropout = Dropout(embedding_dropout)
        self.word_dropout = WordDropout(word_dropout)
        self.dropout = Dropout(dropout)
        self.context_size = context_size

    def init_state(self, encoder_final: torch.Tensor) -> State:
        """encoder_final (B, d_enc) -> s_0 = tanh(W_b encoder_final), as a cell state."""
        return tuple(torch.tanh(self.bridge(encoder_final)).chunk(self.cell.state_parts, dim=1))

    def advance(
        self, gates_in: torch.Tensor, state: State, context: torch.Tensor, memory: AttentionMemory, step: int
    ) -> tuple[State, torch.Tensor, torch.Tensor]:
        """One step of equations 2-5. gates_in (B, G) = W_e E y_{i-1} + b (the input side of the
        cell, hoisted); state s_{i-1}; context c_{i-1} (B, C) (read by attend_from=current only)
        -> (s_i, c_i (B, C), alpha_i. (B, S))."""
        if self.attend_previous:
            context, alpha = self.attention(state[0], memory, step)  # c_i from e_ij = a(s_{i-1}, h_j)   (3-5)
            state = self.cell(gates_in + self.context_gates(context), state)  # s_i = f(s_{i-1}, y_{i-1}, c_i)   (2)
        else:  # Luong: the cell reads the previous context, then s_i attends
            state = self.cell(gates_in + self.context_gates(context), state)  # s_i = f(s_{i-1}, y_{i-1}, c_{i-1})
            context, alpha = self.attention(state[0], memory, step)  # c_i from e_ij = a(s_i, h_j)
        return state, context, alpha

    def step_layers(self) -> list[nn.Linear]:
        """The linear layers every decoder step runs (their weight gradients can be deferred)."""
        layers = [self.cell.hidden, self.context_gates]
        projection = self.attention.score.query_projection
        return layers + ([projection] if projection is not None else [])

    def compile_step(self) -> None:
        """Compile `advance` (equations 2-5 of one step: the part that runs T times per batch) with
        torch.compile, shapes dynamic (batch and source lengths vary)."""
        self.advance = torch.compile(self.advance, dynamic=True)  # type: ignore[method-assign]

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """Target ids (...) -> E y (..., E), with word and element dropout in training."""
        return self.embedding_dropout(self.word_dropout(self.embedding(ids)))

    def output_features(self, s: torch.Tensor, emb: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """Equation 1 up to the vocabulary projection: s (..., H), E y_{i-1} (..., E), c (..., C)
        -> t (..., O) = dropout(tanh(U [s; E y; c])); logits = generator(t)."""
        return self.dropout(torch.tanh(self.readout(torch.cat([s, emb, context], dim=-1))))

    def forward(self, tgt_in: torch.Tensor, memory: AttentionMemory, state: State) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher forcing. tgt_in (B, T) = BOS y_1 .. -> output features t (B, T, O), alphas (B, T, S).
        The vocabulary projection is left to the caller, who may apply it to real tokens only.
        When gradients are wanted, the per-step layers run inside `deferred_weight_grads`: their
        weight gradients are formed once per batch, not once per step (nmt.model.deferred_grads)."""
        emb = self.embed(tgt_in)  # (B, T, E)
        # (T, B, G), hoisted. unbind (not gates[i]) so backward stacks the step gradients
        # instead of adding a full-size zero-padded gradient per step.
        gates = self.embed_gates(emb).transpose(0, 1).unbind(0)
        context = emb.new_zeros(tgt_in.size(0), self.context_size)
        states, contexts, alphas = [], [], []
        deferred = self.defer_weight_grads and torch.is_grad_enabled() and state[0].requires_grad
        with deferred_weight_grads(self.step_layers()) if deferred else contextlib.nullcontext() as anchor:
            if anchor is not None:
                state = (anchor(state[0]), *state[1:])
            for i, gates_i in enumerate(gates):
                state, context, alpha = self.advance(gates_i, state, context, memory, i)
                states.append(state[0])
                contexts.append(context)
                alphas.append(alpha)
        features = self.output_features(torch.stack(states, 1), emb, torch.stack(contexts, 1))
        return features, torch.stack(alphas, 1)

    def step(
        self, y_prev: torch.Tensor, state: State, context: torch.Tensor, memory: AttentionMemory, step: int
    ) -> tuple[torch.Tensor, State, torch.Tensor, torch.Tensor]:
        """Free-running step. y_prev (B,) -> logits (B, V), s_i, c_i (B, C), alpha_i (B, S)."""
        emb = self.embed(y_prev)
        state, context, alpha = self.advance(self.embed_gates(emb), state, context, memory, step)
        return self.generator(self.output_features(state[0], emb, context)), state, context, alpha
