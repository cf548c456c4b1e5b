"""Choosing best.pt the way the model will be used (`train.select_at_end`).

During training, best.pt follows the validation BLEU that `train.decode` gives (greedy, to keep
validation cheap). A model is then evaluated and used with beam search, and under a budget
schedule the last weights (trained at the lowest rate) or an average of the last checkpoints
often translate better with it than the weights of the best greedy validation. So when training
ends, each candidate is decoded on the validation split as `train.select_decode` says (beam 5 by
default, as `nmt.evaluate` decodes), and best.pt becomes the best of them.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from nmt.config.commands import EvalConfig
from nmt.config.schema import Config
from nmt.decoding.scoring import evaluate_checkpoint
from nmt.model.checkpoint import load_checkpoint, save_checkpoint
from nmt.training.averaging import average_checkpoints

log = logging.getLogger(__name__)


def candidates(folder: Path) -> dict[str, Path]:
    """The checkpoints best.pt may become: best.pt itself, last.pt (unless it is the same step;
    a run resumed from last.pt alone may have no best.pt yet)
    and, with two or more kept step checkpoints (`train.keep_checkpoints`), their average
    (written to `average.pt`)."""
    found = {name: folder / name for name in ("best.pt", "last.pt") if (folder / name).is_file()}
    if len(found) == 2 and load_checkpoint(folder / "last.pt").step == load_checkpoint(folder / "best.pt").step:
        del found["last.pt"]
    kept = sorted(folder.glob("step-*.pt"))
    if len(kept) >= 2:
        save_checkpoint(folder / "average.pt", average_checkpoints(kept))
        found["average.pt"] = folder / "average.pt"
    return found


def select_best(cfg: Config, folder: Path) -> dict[str, Any]:
    """Score every candidate of `folder` on validation with `train.select_decode`; copy the best
    into best.pt (a tie keeps best.pt). -> {"decoding", "candidates": {name: scores and step}, "chosen"}
    for metrics.json."""
    decode = cfg.train.select_decode
    scores: dict[str, dict[str, float]] = {}
    decoding = ""  # what the search was, precision included: the same for every candidate
    for name, path in candidates(folder).items():
        report = evaluate_checkpoint(EvalConfig(ckpt=str(path), split="valid", device=cfg.train.device, decode=decode))
        decoding = report["decoding"]
        scores[name] = {"bleu": report["bleu"], "chrf": report["chrf"], "step": load_checkpoint(path).step}
    chosen = max(scores, key=lambda name: (scores[name]["bleu"], name == "best.pt"))
    if chosen != "best.pt":
        save_checkpoint(folder / "best.pt", load_checkpoint(folder / chosen))
        for stale in folder.glob("best.*"):  # hypotheses and reports of the weights best.pt held
            if stale.suffix in (".hyp", ".json"):
                stale.unlink()
    log.info("best.pt: %s (validation BLEU, %s: %s)", chosen, decoding,
             ", ".join(f"{name} {s['bleu']:.2f}" for name, s in scores.items()))
    return {"decoding": decoding, "candidates": scores, "chosen": chosen}
