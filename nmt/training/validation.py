"""Validation: loss and perplexity, greedy BLEU/chrF/exact match, attention diagnostics
(mean row entropy, mean row maximum, AER against gold alignments when the data has them)."""

from __future__ import annotations

import math

import datasets
import torch

from nmt.alignment.aer import alignment_error_rate
from nmt.alignment.extract import attention_statistics, forced_alignments
from nmt.alignment.pharaoh import read_pharaoh
from nmt.alignment.words import SentenceAlignment, word_links
from nmt.config.schema import Config
from nmt.data.batching import BatchSampler
from nmt.data.corpus import gold_alignment_file
from nmt.data.prepare import PreparedData
from nmt.data.tokenizer import PAD
from nmt.decoding.scoring import score_translations
from nmt.decoding.splits import translate_dataset
from nmt.model.ensemble import DecodingModel
from nmt.model.seq2seq import Seq2Seq
from nmt.system.errors import UserError
from nmt.training.loss import smoothed_cross_entropy


@torch.no_grad()
def validate(model: Seq2Seq, ds: datasets.Dataset, data: PreparedData, cfg: Config, device: torch.device) -> dict[str, float]:
    """All validation metrics of the current model on the validation split `ds` (encoded, its
    sources fit to the model: `nmt.decoding.scoring.fit_sources`)."""
    model.eval()
    batch_tokens = cfg.train.decode.batch_tokens
    sampler = BatchSampler(ds, batch_tokens, shuffle=False)
    total = entropy = peak = 0.0
    tokens = rows = 0
    for batch in sampler.epoch(0):
        batch = batch.to(device)
        real = batch.tgt_out != PAD
        out = model(batch.src, batch.src_lens, batch.tgt_in, positions=real)
        total += float(smoothed_cross_entropy(out.logits, batch.tgt_out[real], 0.0)[0])
        tokens += int(real.sum())
        e, m, n = attention_statistics(out.alphas, real)
        entropy, peak, rows = entropy + e, peak + m, rows + n
    hyps, _ = translate_dataset(model, ds, data.tgt_tokenizer, cfg.train.decode, device)
    scores = score_translations(hyps, list(ds["tgt"]))
    loss = total / max(tokens, 1)
    metrics = {
        "loss": loss, "ppl": math.exp(min(loss, 50)), "bleu": scores.bleu, "chrf": scores.chrf,
        "exact_match": scores.exact_match, "attention_entropy": entropy / max(rows, 1),
        "attention_max": peak / max(rows, 1),
    }
    gold = gold_alignment_file(cfg.data, "valid")
    if gold is not None:
        forced = forced_alignments(model, ds, data.src_tokenizer, data.tgt_tokenizer, batch_tokens, device)
        aer = alignment_error_rate(word_links(forced), read_pharaoh(gold))
        metrics.update(aer=aer.aer, alignment_precision=aer.precision, alignment_recall=aer.recall)
    model.train()
    return metrics


def check_gold(data: PreparedData, split: str) -> None:
    """The split's gold alignments (if it has some) parse, one line per sentence pair."""
    gold = gold_alignment_file(data.cfg, split)
    if gold is not None and len(read_pharaoh(gold)) != len(data.split(split)):
        raise UserError(f"{gold}: {len(read_pharaoh(gold))} lines of gold alignments for {len(data.split(split))} sentence pairs")


def attention_examples(
    model: DecodingModel, ds: datasets.Dataset, data: PreparedData, k: int, device: torch.device
) -> list[SentenceAlignment]:
    """Forced alignments of the first k sentences of the validation split `ds` (the same ones at every validation)."""
    rows = list(range(min(k, len(ds))))
    if not rows:
        return []
    examples = forced_alignments(model, ds, data.src_tokenizer, data.tgt_tokenizer, 100_000, device, rows)
    model.train()
    return examples
