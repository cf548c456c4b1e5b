"""`python -m nmt.train [overrides]`: the Hydra entry point; the work is in `nmt.training.loop.train`.

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
from omegaconf import DictConfig, OmegaConf

from nmt.config.schema import Config
from nmt.system import cli
from nmt.system.distributed import env_rank
from nmt.system.files import atomic_write_text
from nmt.training.session import train
from nmt.training.side_by_side import train_ensemble


def save_hydra_record(cfg: DictConfig, run_dir: Path) -> None:
    """`.hydra/{config,hydra,overrides}.yaml`, as Hydra writes them, but only once this process
    holds the run directory (configs/config.yaml sets hydra.output_subdir=null so Hydra does not
    write them earlier, over those of a training that is still running there)."""
    hydra_cfg = HydraConfig.get()
    record = {"config.yaml": cfg, "hydra.yaml": hydra_cfg, "overrides.yaml": hydra_cfg.overrides.task}
    for name, node in record.items():
        atomic_write_text(run_dir / ".hydra" / name, OmegaConf.to_yaml(node))


@hydra.main(config_path="../configs", config_name="config", version_base="1.3")
@cli.exit_on_user_error
def main(cfg: DictConfig) -> float:
    """Train one model, or an ensemble (`train.ensemble_size`); returns the best validation BLEU
    (the value Hydra sweepers optimise; of the ensemble, when there is one)."""
    config = cli.typed_config(cfg, Config)
    cli.quiet_libraries(config.train.progress)
    run_dir = Path(HydraConfig.get().runtime.output_dir)

    def record() -> None:
        if env_rank() == 0:
            save_hydra_record(cfg, run_dir)

    if config.train.ensemble_size > 1:
        return train_ensemble(config, run_dir, on_start=record, set_up=cli.set_up_worker).best_bleu
    return train(config, run_dir, on_start=record).best_bleu


def worker_overrides(rank: int) -> list[str]:
    """Hydra overrides that keep a non-zero rank out of the run directory."""
    scratch = tempfile.mkdtemp(prefix=f"nmt-rank{rank}-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return [f"hydra.run.dir={scratch}", "hydra/job_logging=stdout"]


if __name__ == "__main__":
    if env_rank() > 0:
        sys.argv += worker_overrides(env_rank())
    cli.run(main)
