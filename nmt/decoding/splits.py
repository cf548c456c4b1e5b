"""Translate with a model as a `DecodeConfig` says: a batch, or a whole encoded split in batches."""

from __future__ import annotations

import logging

import datasets
import torch

from nmt.config.schema import DecodeConfig
from nmt.data.batching import BatchSampler
from nmt.data.prepare import truncate_sources
from nmt.data.tokenizer import Tokenizer
from nmt.decoding.search import Hypothesis, beam_search
from nmt.model.ensemble import DecodingModel
from nmt.system.runtime import autocast_dtype

log = logging.getLogger(__name__)


def search_batch(
    model: DecodingModel, src: torch.Tensor, src_lens: torch.Tensor, opts: DecodeConfig, n_best: int = 1
) -> list[list[Hypothesis]]:
    """src (B, S), src_lens (B,) -> the n_best hypotheses of each sentence, best first. Beam size 1
    is greedy search: the length penalty (`alpha`) only applies to a real beam."""
    alpha = opts.alpha if opts.beam_size > 1 else 0.0
    cast = autocast_dtype(opts.precision.value, src.device, use="decode")
    with torch.autocast(src.device.type, dtype=cast or torch.float32, enabled=cast is not None):
        return beam_search(model, src, src_lens, opts.beam_size, alpha, opts.max_len_ratio, opts.max_len_extra, n_best)


def translate_dataset(
    model: DecodingModel, ds: datasets.Dataset, tokenizer: Tokenizer, opts: DecodeConfig, device: torch.device, max_sentences: int = 0,
) -> tuple[list[str], list[Hypothesis]]:
    """Translate every row of an encoded split -> (detokenized texts, best hypotheses), in row order.
    Batches hold at most `opts.batch_tokens` source tokens and (if > 0) `max_sentences` sentences."""
    was_training = model.training
    model.eval()
    sampler = BatchSampler(ds, opts.batch_tokens, shuffle=False, max_sentences=max_sentences)
    hyps: list[Hypothesis | None] = [None] * len(ds)
    for index in sampler.batches(0):
        batch = sampler.collate(index).to(device)
        for row, nbest in zip(index, search_batch(model, batch.src, batch.src_lens, opts)):
            hyps[int(row)] = nbest[0]
    model.train(was_training)
    done = [h for h in hyps if h is not None]
    assert len(done) == len(ds)
    return tokenizer.decode([h.ids for h in done]), done


def fit_sources(ds: datasets.Dataset, model: DecodingModel, key: str, what: str) -> datasets.Dataset:
    """Truncate the sources the model cannot take whole (the location score's limit), with a warning."""
    ds, cut = truncate_sources(ds, model.max_source_len, key)
    if cut:
        lines = ", ".join(str(r + 1) for r in cut[:5]) + (", ..." if len(cut) > 5 else "")
        log.warning("%s: %d source sentences longer than the model's limit of %s tokens were truncated (lines %s)",
                    what, len(cut), model.max_source_len, lines)
    return ds
