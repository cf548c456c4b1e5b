#!/usr/bin/env python
"""Average the weights of several checkpoints of one run into a new checkpoint, to evaluate or
translate with like any other (`nmt.training.averaging.average_checkpoints`).

    python scripts/average_checkpoints.py A.pt B.pt C.pt --output avg.pt
    python scripts/average_checkpoints.py --last 5 outputs/DATE/TIME --output avg.pt   # its step-N.pt files

Step checkpoints are kept by training with `train.keep_checkpoints=K`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nmt.model.checkpoint import save_checkpoint
from nmt.system.errors import UserError
from nmt.training.averaging import average_checkpoints


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="*", type=Path)
    parser.add_argument("--last", type=int, default=0, help="average the newest N checkpoints/step-*.pt of this run folder")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    paths = list(args.checkpoints)
    try:
        if args.last:
            if len(paths) != 1 or not paths[0].is_dir():
                raise UserError("--last N takes one run folder")
            paths = sorted((paths[0] / "checkpoints").glob("step-*.pt"))[-args.last :]
            if len(paths) < args.last:
                raise UserError(f"{args.checkpoints[0]}: {len(paths)} step checkpoints, not {args.last} (train.keep_checkpoints)")
        save_checkpoint(args.output, average_checkpoints(paths))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"averaged {len(paths)} checkpoints into {args.output}: {', '.join(p.name for p in paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
