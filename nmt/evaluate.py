"""`python -m nmt.evaluate ckpt=PATH split=test`: BLEU and chrF of a checkpoint on a split.

Prints both scores with their sacrebleu signatures, writes the detokenized hypotheses and a JSON
report next to the checkpoint (`{ckpt stem}.{split}.hyp`, `{ckpt stem}.{split}.json`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from nmt.checkpoint import load_model
from nmt.config import EvalConfig, register_configs
from nmt.data.corpus import load_split, split_prefix
from nmt.data.prepare import encode_pairs
from nmt.errors import UserError, as_schema, exit_on_user_error
from nmt.evaluation import score_translations, translate_dataset
from nmt.runtime import resolve_device

log = logging.getLogger(__name__)
register_configs()


def newest_checkpoint(runs_dir: str | Path, name: str = "best.pt") -> Path:
    """The `checkpoints/{name}` of the most recently modified run under `runs_dir`."""
    found = sorted(Path(runs_dir).glob(f"**/checkpoints/{name}"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise UserError(f"no checkpoints/{name} under {runs_dir}/: train first or pass ckpt=PATH")
    return found[-1]


def evaluate(cfg: EvalConfig) -> dict[str, Any]:
    """Translate the split with the checkpoint's model, score it, write hypotheses and report."""
    ckpt = Path(cfg.ckpt) if cfg.ckpt else newest_checkpoint(cfg.runs_dir)
    device = resolve_device(cfg.device)
    model, run_cfg, src_tok, tgt_tok = load_model(ckpt, device)
    raw = load_split(run_cfg.data, cfg.split)
    key = hashlib.sha1(f"{ckpt.resolve()}:{ckpt.stat().st_mtime_ns}:{cfg.split}".encode()).hexdigest()[:16]
    ds = encode_pairs(raw, src_tok, tgt_tok, key)
    hyps, _ = translate_dataset(
        model, ds, tgt_tok, cfg.batch_tokens, cfg.max_len_ratio, cfg.max_len_extra, device, cfg.beam_size, cfg.alpha
    )
    scores = score_translations(hyps, list(raw["tgt"]))
    name = Path(split_prefix(run_cfg.data, cfg.split)).name
    hyp_path = Path(cfg.output) if cfg.output else ckpt.with_name(f"{ckpt.stem}.{name}.hyp")
    hyp_path.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    decoding = "greedy" if cfg.beam_size <= 1 else f"beam {cfg.beam_size}, alpha {cfg.alpha}"
    report = {"checkpoint": str(ckpt), "split": name, "sentences": len(hyps), "decoding": decoding, **asdict(scores)}
    ckpt.with_name(f"{ckpt.stem}.{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"{name}: BLEU = {scores.bleu:.2f}  chrF = {scores.chrf:.2f}  ({len(hyps)} sentences, {decoding})")
    print(f"BLEU signature: {scores.bleu_signature}")
    print(f"chrF signature: {scores.chrf_signature}")
    print(f"hypotheses: {hyp_path}")
    return report


@hydra.main(config_path="../configs", config_name="evaluate", version_base="1.3")
@exit_on_user_error
def main(cfg: DictConfig) -> None:
    config = as_schema(cfg, EvalConfig)
    evaluate(config)


if __name__ == "__main__":
    main()
