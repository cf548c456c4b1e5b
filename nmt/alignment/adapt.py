"""Adapting a trained model to the sentence pairs it is about to align.

A statistical aligner learns from the text it aligns; a translation model trained on other text
has never read the pairs, and out of its domain its attention falls apart (unseen words, longer
sentences). `adapt` continues training a copy of the model on the pairs themselves, with the
translation loss and, when links are given (an aligner's links of the same pairs, never gold),
guided alignment toward them (Garg et al. 2019), for a budget of steps or minutes; the links are
then read from the adapted model's attention as before. The subword model is kept: it splits
unseen words into known pieces, so every pair can be read.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass

import datasets
import torch

from nmt.alignment.guidance import Guidance
from nmt.alignment.pharaoh import Link
from nmt.data.batching import BatchSampler
from nmt.data.tokenizer import Tokenizer
from nmt.model.seq2seq import Seq2Seq
from nmt.training.step import train_step

log = logging.getLogger(__name__)


@dataclass
class AdaptBudget:
    """How long and how hard to adapt (plain values; `nmt.config.commands.AdaptOptions` holds the defaults)."""

    steps: int  # optimiser steps (0 = no limit, then `minutes` must be set)
    minutes: float  # wall-clock limit (0 = no limit)
    lr: float
    guide_weight: float  # weight of the guided-alignment loss per target token (0 = translation loss only)
    label_smoothing: float
    batch_tokens: int
    seed: int


@dataclass
class Adapted:
    """The adapted model and what its adaptation did."""

    model: Seq2Seq
    steps: int
    seconds: float
    loss: float  # mean cross-entropy per target token over the last epoch's steps
    guided: float  # mean guided-alignment cross-entropy per target token over the same steps (0 without links)


def adapt(
    model: Seq2Seq, ds: datasets.Dataset, src_tok: Tokenizer, tgt_tok: Tokenizer, links: list[set[Link]] | None,
    budget: AdaptBudget, device: torch.device,
) -> Adapted:
    """Continue training a copy of `model` on the encoded pairs `ds` (columns src_ids, tgt_ids and
    line, the pair's 0-based line, which indexes `links`) -> the adapted copy; `model` is untouched.

    Each step is the training step (`nmt.training.step.train_step`: label-smoothed cross-entropy +
    the attention's own losses + guide_weight x the guided loss of `links`, per target token,
    clipped at norm 1) with Adam at a constant rate; the pairs are visited in length-bucketed
    shuffled batches, epoch after epoch, until the budget is spent."""
    assert budget.steps or budget.minutes, "an adaptation budget needs steps or minutes"
    torch.manual_seed(budget.seed)
    adapted = copy.deepcopy(model).to(device).train()
    optimizer = torch.optim.Adam(adapted.parameters(), lr=budget.lr)
    sampler = BatchSampler(ds, budget.batch_tokens, shuffle=True, seed=budget.seed)
    guidance = Guidance.of_split(ds, src_tok, tgt_tok, links) if links is not None and budget.guide_weight > 0 else None
    started, step, epoch = time.monotonic(), 0, 0
    while True:
        window: list[tuple[float, float, int]] = []  # (loss, guided loss, tokens) of this epoch's steps
        for index in sampler.batches(epoch):
            batch = sampler.collate(index)
            if guidance is not None:
                batch.guide = guidance.batch(index, batch.src.size(1), batch.tgt_in.size(1))
            result = train_step(adapted, optimizer, batch.to(device), budget.label_smoothing, 1.0,
                                guide_weight=budget.guide_weight if guidance is not None else 0.0)
            step += 1
            if result.finite:
                window.append((result.loss, result.guided, result.tokens))
            if (budget.steps and step >= budget.steps) or (budget.minutes and time.monotonic() - started >= budget.minutes * 60):
                return _finished(adapted, step, time.monotonic() - started, window)
        epoch += 1
        tokens = sum(t for _, _, t in window) or 1
        log.info("adaptation: epoch %d, step %d, loss %.3f per token", epoch, step, sum(v for v, _, _ in window) / tokens)


def _finished(model: Seq2Seq, steps: int, seconds: float, window: list[tuple[float, float, int]]) -> Adapted:
    tokens = sum(t for _, _, t in window) or 1
    model.eval()
    return Adapted(model, steps, seconds, sum(v for v, _, _ in window) / tokens, sum(g for _, g, _ in window) / tokens)
