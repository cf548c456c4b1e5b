"""`python -m nmt.train [overrides]`: the Hydra entry point; the work is in `nmt.trainer.train`.

Under `torchrun --nproc_per_node=N -m nmt.train ...` only rank 0 owns the run directory: the
other ranks get a private temporary one (removed at exit) and log to the console only, so one
set of outputs is written however many processes train.
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from nmt.config import Config, register_configs
from nmt.distributed import env_rank
from nmt.errors import as_schema, exit_on_user_error
from nmt.trainer import train

register_configs()


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
@exit_on_user_error
def main(cfg: DictConfig) -> float:
    """Train; returns the best validation BLEU (the value Hydra sweepers optimise)."""
    config = as_schema(cfg, Config)
    state = train(config, Path(HydraConfig.get().runtime.output_dir))
    return float(state["best_bleu"])


def worker_overrides(rank: int) -> list[str]:
    """Hydra overrides that keep a non-zero rank out of the run directory."""
    scratch = tempfile.mkdtemp(prefix=f"nmt-rank{rank}-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return [f"hydra.run.dir={scratch}", "hydra.output_subdir=null", "hydra/job_logging=stdout"]


if __name__ == "__main__":
    if env_rank() > 0:
        sys.argv += worker_overrides(env_rank())
    main()
