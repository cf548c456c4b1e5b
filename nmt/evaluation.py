"""Translate an encoded split and score it: BLEU and chrF (sacrebleu), exact match; the evaluation
of a checkpoint on a split, with its hypotheses and report written beside it."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import datasets
import sacrebleu
import torch

from nmt.checkpoint import checkpoint_path, load_model
from nmt.config import EvalConfig
from nmt.data.batching import BatchSampler
from nmt.data.corpus import load_split, split_prefix
from nmt.data.prepare import encode_pairs, truncate_sources
from nmt.data.tokenizer import Tokenizer
from nmt.files import atomic_write_text
from nmt.model.seq2seq import Seq2Seq
from nmt.runtime import resolve_device
from nmt.search import Hypothesis, beam_search, greedy_search

log = logging.getLogger(__name__)


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


def fit_sources(ds: datasets.Dataset, model: Seq2Seq, key: str, what: str) -> datasets.Dataset:
    """Truncate the sources the model cannot take whole (the location score's limit), with a warning."""
    ds, cut = truncate_sources(ds, model.max_source_len, key)
    if cut:
        lines = ", ".join(str(r + 1) for r in cut[:5]) + (", ..." if len(cut) > 5 else "")
        log.warning("%s: %d source sentences longer than the model's limit of %s tokens were truncated (lines %s)",
                    what, len(cut), model.max_source_len, lines)
    return ds


def evaluate_checkpoint(cfg: EvalConfig) -> dict[str, Any]:
    """Translate the split with the checkpoint's model and score it; writes the detokenized
    hypotheses (`{ckpt stem}.{split}.hyp`, or `cfg.output`) and a JSON report (`{ckpt stem}.{split}.json`)
    beside the checkpoint, each atomically. Returns the report (with `hypotheses`: the file)."""
    ckpt = checkpoint_path(cfg.ckpt, cfg.runs_dir)
    device = resolve_device(cfg.device)
    model, run_cfg, src_tok, tgt_tok = load_model(ckpt, device)
    raw = load_split(run_cfg.data, cfg.split)
    name = Path(split_prefix(run_cfg.data, cfg.split)).name
    key = hashlib.sha1(f"{ckpt.resolve()}:{ckpt.stat().st_mtime_ns}:{cfg.split}".encode()).hexdigest()[:16]
    ds = fit_sources(encode_pairs(raw, src_tok, tgt_tok, key), model, key, name)
    hyps, _ = translate_dataset(
        model, ds, tgt_tok, cfg.batch_tokens, cfg.max_len_ratio, cfg.max_len_extra, device, cfg.beam_size, cfg.alpha
    )
    scores = score_translations(hyps, list(raw["tgt"]))
    hyp_path = Path(cfg.output) if cfg.output else ckpt.with_name(f"{ckpt.stem}.{name}.hyp")
    decoding = "greedy" if cfg.beam_size <= 1 else f"beam {cfg.beam_size}, alpha {cfg.alpha}"
    report = {"checkpoint": str(ckpt), "split": name, "sentences": len(hyps), "decoding": decoding, **asdict(scores)}
    atomic_write_text(hyp_path, "".join(h + "\n" for h in hyps))
    atomic_write_text(ckpt.with_name(f"{ckpt.stem}.{name}.json"), json.dumps(report, indent=2) + "\n")
    return {**report, "hypotheses": str(hyp_path)}
