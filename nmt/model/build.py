"""The one builder: config -> model. Each choice is validated here and mapped through a table."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from nmt.attention.block import Attention, CoverageTerm
from nmt.attention.modes import (
    GumbelHardNormaliser,
    LocalNormaliser,
    Normaliser,
    ReinforceHardNormaliser,
    SoftNormaliser,
)
from nmt.attention.scores import (
    AdditiveScore,
    AttentionScore,
    DotScore,
    GeneralScore,
    LocationScore,
    ScaledDotScore,
)
from nmt.attention.self_attention import SelfAttentionLayer
from nmt.config.checks import check_model
from nmt.config.schema import AttendFrom, AttentionConfig, HardEstimator, LocalVariant, Mode, ModelConfig, Score
from nmt.data.tokenizer import PAD
from nmt.model.decoder import Decoder
from nmt.model.encoder import Encoder
from nmt.model.seq2seq import Seq2Seq
from nmt.system.errors import UserError

# score name -> constructor(config, query size d_s, key size d_h)
SCORES: dict[Score, Callable[[AttentionConfig, int, int], AttentionScore]] = {
    Score.dot: lambda c, q, k: DotScore(),
    Score.scaled_dot: lambda c, q, k: ScaledDotScore(k),
    Score.general: lambda c, q, k: GeneralScore(q, k),
    Score.additive: lambda c, q, k: AdditiveScore(q, k, c.hidden_size),
    Score.location: lambda c, q, k: LocationScore(q, c.max_source_len),
}

# hard-attention training estimator -> constructor(config)
HARD_ESTIMATORS: dict[HardEstimator, Callable[[AttentionConfig], Normaliser]] = {
    HardEstimator.gumbel: lambda c: GumbelHardNormaliser(c.gumbel_temperature),
    HardEstimator.reinforce: lambda c: ReinforceHardNormaliser(c.reinforce_baseline_decay, c.reinforce_entropy),
}

# mode name -> constructor(config, query size d_s)
NORMALISERS: dict[Mode, Callable[[AttentionConfig, int], Normaliser]] = {
    Mode.soft: lambda c, q: SoftNormaliser(),
    Mode.hard: lambda c, q: HARD_ESTIMATORS[c.hard_estimator](c),
    Mode.local: lambda c, q: LocalNormaliser(c.window, c.local == LocalVariant.predictive, q, c.hidden_size),
}


def build_attention(cfg: AttentionConfig, query_size: int, key_size: int) -> Attention:
    """An attention block for queries of size d_s over keys of size d_h (settings checked by `check_model`)."""
    coverage = CoverageTerm(cfg.coverage_hidden_size) if cfg.coverage else None
    return Attention(
        SCORES[cfg.score](cfg, query_size, key_size), NORMALISERS[cfg.mode](cfg, query_size),
        coverage, cfg.coverage_loss_weight if cfg.coverage else 0.0,
    )


def make_embedding(vocab_size: int, size: int) -> nn.Embedding:
    """Embeddings with std size^-1/2 (not torch's 1): when tied to the output layer, logits
    start near 0 instead of at a scale of sqrt(size)."""
    embedding = nn.Embedding(vocab_size, size, padding_idx=PAD)
    nn.init.normal_(embedding.weight, std=size**-0.5)
    with torch.no_grad():
        embedding.weight[PAD].zero_()
    return embedding


def initialise_uniform(model: nn.Module, init_range: float, keep: list[torch.Tensor]) -> None:
    """Draw every parameter of `model` but those in `keep` (the embeddings, whose scale
    `make_embedding` sets for the tied output layer) from U(-init_range, init_range)."""
    kept = {id(param) for param in keep}
    with torch.no_grad():
        for param in model.parameters():
            if id(param) not in kept:
                param.uniform_(-init_range, init_range)


def build_model(cfg: ModelConfig, src_vocab: int, tgt_vocab: int) -> Seq2Seq:
    """Assemble embeddings, encoder, attention and decoder from the model config (a UserError
    names the setting when sizes disagree)."""
    check_model(cfg)
    if cfg.tie_source_embeddings and src_vocab != tgt_vocab:
        raise UserError(f"model.tie_source_embeddings=true needs one vocabulary for both sides (source {src_vocab} pieces, "
                        f"target {tgt_vocab}): train with data.joint_vocab=true")
    src_embedding = make_embedding(src_vocab, cfg.embedding_size)  # first, as before the option: untied models start as they did
    # tied: one matrix, one parameter, which the optimiser, averaging and gradient clipping see once
    tgt_embedding = src_embedding if cfg.tie_source_embeddings else make_embedding(tgt_vocab, cfg.embedding_size)
    enc = cfg.encoder
    self_attention = None
    if enc.self_attention:
        size = 2 * enc.hidden_size
        score = SCORES[enc.self_attention_score](cfg.attention, size, size)
        self_attention = SelfAttentionLayer(size, score, enc.dropout)
    encoder = Encoder(cfg.embedding_size, enc.hidden_size, enc.layers, enc.cell.value, enc.dropout, self_attention)
    dec = cfg.decoder
    attention = build_attention(cfg.attention, dec.hidden_size, encoder.output_size)
    decoder = Decoder(
        tgt_embedding,
        hidden_size=dec.hidden_size,
        context_size=encoder.output_size,
        encoder_final_size=encoder.output_size,
        output_size=dec.output_size,
        cell=dec.cell.value,
        attention=attention,
        attend_previous=cfg.attention.attend_from == AttendFrom.previous,
        dropout=dec.dropout,
        embedding_dropout=cfg.embedding_dropout,
        word_dropout=cfg.word_dropout,
        tie_embeddings=cfg.tie_target_embeddings,
    )
    model = Seq2Seq(src_embedding, encoder, decoder, cfg.embedding_dropout, cfg.word_dropout)
    if cfg.init_range > 0:
        initialise_uniform(model, cfg.init_range, [src_embedding.weight, tgt_embedding.weight])
    return model
