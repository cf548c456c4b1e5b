"""Scores of translations (BLEU and chrF by sacrebleu, exact match), and the evaluation of a
checkpoint on a split, with its hypotheses and report written beside it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import sacrebleu
import torch

from nmt.config.commands import EvalConfig
from nmt.config.schema import DecodeConfig
from nmt.data.corpus import load_split, split_prefix
from nmt.data.prepare import encode_pairs
from nmt.decoding.splits import fit_sources, translate_dataset
from nmt.model.checkpoint import checkpoint_path, load_models
from nmt.system.files import atomic_write_text
from nmt.system.runtime import autocast_dtype, resolve_device


@dataclass
class Scores:
    bleu: float
    chrf: float
    exact_match: float  # fraction of hypotheses identical to their reference
    bleu_signature: str
    chrf_signature: str


def describe_decoding(decode: DecodeConfig, device: torch.device) -> str:
    """What a search on `device` with `decode` is, for reports and logs, e.g. "beam 5, alpha 0.6, bf16":
    the precision is the one `decode.precision` resolves to there (auto depends on the CPU)."""
    search = "greedy" if decode.beam_size <= 1 else f"beam {decode.beam_size}, alpha {decode.alpha}"
    precision = "fp32" if autocast_dtype(decode.precision, device, use="decode") is None else "bf16"
    return f"{search}, {precision}"


def score_translations(hypotheses: list[str], references: list[str]) -> Scores:
    """Corpus BLEU and chrF with sacrebleu defaults (detokenized, cased, 13a) and exact match."""
    bleu = sacrebleu.metrics.BLEU()
    chrf = sacrebleu.metrics.CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    exact = sum(h.strip() == r.strip() for h, r in zip(hypotheses, references)) / max(len(references), 1)
    return Scores(b.score, c.score, exact, str(bleu.get_signature()), str(chrf.get_signature()))


def evaluate_checkpoint(cfg: EvalConfig) -> dict[str, Any]:
    """Translate the split with the checkpoint's model and score it; writes the detokenized
    hypotheses (`{ckpt stem}.{split}.hyp`, or `cfg.output`) and a JSON report (`{ckpt stem}.{split}.json`)
    beside the checkpoint, each atomically. Returns the report (with `hypotheses`: the file)."""
    ckpt = checkpoint_path(cfg.ckpt, cfg.runs_dir)
    device = resolve_device(cfg.device)
    model, run_cfg, src_tok, tgt_tok = load_models([ckpt, *cfg.ensemble], device)
    raw = load_split(run_cfg.data, cfg.split)
    name = Path(split_prefix(run_cfg.data, cfg.split)).name
    key = hashlib.sha1(f"{ckpt.resolve()}:{ckpt.stat().st_mtime_ns}:{cfg.split}".encode()).hexdigest()[:16]
    ds = fit_sources(encode_pairs(raw, src_tok, tgt_tok, key), model, key, name)
    hyps, _ = translate_dataset(model, ds, tgt_tok, cfg.decode, device)
    scores = score_translations(hyps, list(raw["tgt"]))
    hyp_path = Path(cfg.output) if cfg.output else ckpt.with_name(f"{ckpt.stem}.{name}.hyp")
    report = {"checkpoint": str(ckpt), "ensemble": list(cfg.ensemble), "split": name, "sentences": len(hyps),
              "decoding": describe_decoding(cfg.decode, device),
              **asdict(scores)}
    atomic_write_text(hyp_path, "".join(h + "\n" for h in hyps))
    atomic_write_text(ckpt.with_name(f"{ckpt.stem}.{name}.json"), json.dumps(report, indent=2) + "\n")
    return {**report, "hypotheses": str(hyp_path)}
