"""`python -m nmt.train [overrides]`: the Hydra entry point; the work is in `nmt.trainer.train`."""

from __future__ import annotations

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from nmt.config import Config, register_configs
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


if __name__ == "__main__":
    main()
