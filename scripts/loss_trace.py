#!/usr/bin/env python
"""The first N per-step training losses of the default configuration (Multi30k de-en, seed 42),
compared with a recorded trace: a restructuring that changes no behaviour leaves every one equal.

    python scripts/loss_trace.py                          # 200 steps, compared with docs/loss_trace_default.json
    python scripts/loss_trace.py --write docs/loss_trace_default.json   # record a new reference

Each loss is TensorBoard's `train/loss` with `train.log_every=1` (the step's summed cross-entropy
over its target tokens, float32); validation runs once, after the last step. About 3 minutes on
2 cores. Extra arguments are Hydra overrides (e.g. `train.threads=1`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from nmt.system.cli import compose_train_config, quiet_libraries
from nmt.training.session import train

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "loss_trace_default.json"


def trace(steps: int, overrides: list[str]) -> dict[int, float]:
    """Train the default model for `steps` steps in a temporary run folder -> {step: loss}."""
    cfg = compose_train_config([f"train.max_steps={steps}", "train.log_every=1", f"train.valid_every={steps}",
                                "train.test_at_end=false", "train.progress=false", "log.attention_examples=0",
                                *overrides])
    with tempfile.TemporaryDirectory() as run_dir:
        train(cfg, Path(run_dir))
        events = EventAccumulator(str(Path(run_dir) / "tensorboard"))
        events.Reload()
        return {e.step: e.value for e in events.Scalars("train/loss")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--write", type=Path, help="record the trace here instead of comparing")
    args, overrides = parser.parse_known_args()
    quiet_libraries(progress=False)
    losses = trace(args.steps, overrides)
    if args.write:
        args.write.write_text(json.dumps({str(k): v for k, v in sorted(losses.items())}, indent=0) + "\n")
        print(f"wrote {len(losses)} losses to {args.write}")
        return 0
    reference = {int(k): v for k, v in json.loads(args.reference.read_text()).items()}
    common = sorted(set(reference) & set(losses))
    equal = sum(reference[s] == losses[s] for s in common)
    worst = max((abs(reference[s] - losses[s]) for s in common), default=0.0)
    print(f"{equal} of {len(common)} per-step losses identical to {args.reference.name} (steps 1-{max(common, default=0)}; "
          f"largest difference {worst:.3g}); step 1: {losses.get(1, float('nan')):.6f}, step {args.steps}: "
          f"{losses.get(args.steps, float('nan')):.6f}")
    return 0 if equal == len(common) == args.steps else 1


if __name__ == "__main__":
    sys.exit(main())
