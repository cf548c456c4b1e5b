"""Translate an encoded split and score it: BLEU and chrF (sacrebleu), exact match."""

from __future__ import annotations

from dataclasses import dataclass

import datasets
import sacrebleu
import torch

from nmt.data.batching import BatchSampler
from nmt.data.tokenizer import Tokenizer
from nmt.model.seq2seq import Seq2Seq
from nmt.search import Hypothesis, beam_search, greedy_search


@dataclass
class Scores:
    bleu: float
    chrf: float
    exact_match: float  # fraction of hypotheses identical to their reference
    bleu_signature: str
    chrf_signature: str


def translate_dataset(
    model: Seq2Seq, ds: datasets.Dataset, tokenizer: Tokenizer, batch_tokens: int,
    ratio: float, extra: int, device: torch.device, beam_size: int = 1, alpha: float = 0.0, max_sentences: int = 0,
) -> tuple[list[str], list[Hypothesis]]:
    """Translate every row of an encoded split, greedy (beam_size 1) or by beam search with
    length penalty alpha -> (detokenized texts, best hypotheses), in row order. Batches hold at
    most `batch_tokens` source tokens and (if > 0) `max_sentences` sentences."""
    was_training = model.training
    model.eval()
    sampler = BatchSampler(ds, batch_tokens, shuffle=False, max_sentences=max_sentences)
    hyps: list[Hypothesis | None] = [None] * len(ds)
    for index in sampler.batches(0):
        batch = sampler.collate(index).to(device)
        if beam_size > 1:
            best = [n[0] for n in beam_search(model, batch.src, batch.src_lens, beam_size, alpha, ratio, extra)]
        else:
            best = greedy_search(model, batch.src, batch.src_lens, ratio, extra)
        for row, hyp in zip(index, best):
            hyps[int(row)] = hyp
    model.train(was_training)
    done = [h for h in hyps if h is not None]
    assert len(done) == len(ds)
    return tokenizer.decode([h.ids for h in done]), done


def score_translations(hypotheses: list[str], references: list[str]) -> Scores:
    """Corpus BLEU and chrF with sacrebleu defaults (detokenized, cased, 13a) and exact match."""
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    exact = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references)) / max(len(references), 1)
    return Scores(b.score, c.score, exact, str(bleu.get_signature()), str(chrf.get_signature()))
