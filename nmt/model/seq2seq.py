"""The encoder-decoder model: source embeddings -> encoder -> attention memory -> decoder."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn

from nmt.attention.memory import AttentionMemory
from nmt.data.tokenizer import PAD
from nmt.model.cells import State
from nmt.model.decoder import Decoder
from nmt.model.dropout import Dropout, WordDropout
from nmt.model.encoder import Encoder


class Seq2SeqOutput(NamedTuple):
    """logits (B, T, V) or (N, V); alphas (B, T, S); memory: the attention memory of the pass
    (with the samples of stochastic attention, for its auxiliary loss)."""

    logits: torch.Tensor
    alphas: torch.Tensor
    memory: AttentionMemory


class Seq2Seq(nn.Module):
    """RNN encoder-decoder with attention (built by `nmt.model.build.build_model`)."""

    def __init__(
        self, src_embedding: nn.Embedding, encoder: Encoder, decoder: Decoder, embedding_dropout: float, word_dropout: float
    ) -> None:
        super().__init__()
        self.src_embedding = src_embedding
        self.encoder = encoder
        self.decoder = decoder
        self.embedding_dropout = Dropout(embedding_dropout)
        self.word_dropout = WordDropout(word_dropout)

    @property
    def max_source_len(self) -> int | None:
        """The longest source (tokens, EOS included) the model accepts; None: any length. Only
        Luong's location score has a limit (its W s has one output per source position)."""
        scores = [self.decoder.attention.score]
        if self.encoder.self_attention is not None:
            scores.append(self.encoder.self_attention.score)
        limits = [s.max_keys for s in scores if s.max_keys is not None]
        return min(limits) if limits else None

    def encode(self, src: torch.Tensor, src_lens: torch.Tensor) -> tuple[AttentionMemory, State]:
        """src (B, S) ids, src_lens (B,) -> attention memory over h (B, S, 2H) and s_0."""
        states, final = self.encoder(self.embedding_dropout(self.word_dropout(self.src_embedding(src))), src_lens)
        memory = self.decoder.attention.memory(states, states, src != PAD)
        return memory, self.decoder.init_state(final)

    def start(self, src: torch.Tensor, src_lens: torch.Tensor) -> tuple[AttentionMemory, State, torch.Tensor]:
        """What a search needs before the first step: src (B, S), src_lens (B,) -> attention memory,
        s_0, and the initial context c_0 = 0 (B, C)."""
        memory, state = self.encode(src, src_lens)
        return memory, state, memory.values.new_zeros(src.size(0), memory.values.size(2))

    def step(
        self, y_prev: torch.Tensor, state: State, context: torch.Tensor, memory: AttentionMemory, step: int
    ) -> tuple[torch.Tensor, State, torch.Tensor, torch.Tensor]:
        """One free-running decoder step (`Decoder.step`): y_prev (R,) -> logits (R, V), state, context, alpha (R, S)."""
        return self.decoder.step(y_prev, state, context, memory, step)

    def forward(
        self, src: torch.Tensor, src_lens: torch.Tensor, tgt_in: torch.Tensor, positions: torch.Tensor | None = None
    ) -> Seq2SeqOutput:
        """Teacher forcing. src (B, S), src_lens (B,), tgt_in (B, T) -> logits, alphas (B, T, S), memory.
        logits are (B, T, V), or (N, V) for the N positions where `positions` (B, T) is True:
        the vocabulary projection, the costliest layer, then skips padding."""
        memory, state = self.encode(src, src_lens)
        features, alphas = self.decoder(tgt_in, memory, state)
        if positions is not None:
            features = features[positions]
        return Seq2SeqOutput(self.decoder.generator(features), alphas, memory)

    def auxiliary_loss(self, out: Seq2SeqOutput, token_nll: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
        """The attention block's own training losses (REINFORCE's score-function term, the coverage
        penalty), summed over real target steps; 0 when it has none. token_nll (N,): the negative
        log-likelihood of the N real target tokens, where real (B, T) is True. Stochastic attention
        is rewarded per sentence by its mean target log-likelihood."""
        token_ll = torch.zeros(real.shape, dtype=token_nll.dtype, device=token_nll.device).masked_scatter(real, -token_nll)
        reward = token_ll.sum(1) / real.sum(1)
        aux = self.decoder.attention.auxiliary_loss(out.memory, reward, real)
        return aux if aux is not None else token_nll.new_zeros(())

    def attention_matrices(self, src: torch.Tensor, src_lens: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Forced alignment: teacher forcing on a known target, without the vocabulary projection.
        src (B, S), tgt_in (B, T) = BOS y_1..y_n -> alphas (B, T, S): one row per target token and
        a last row for the EOS the model is asked to predict after y_n."""
        memory, state = self.encode(src, src_lens)
        return self.decoder(tgt_in, memory, state)[1]
