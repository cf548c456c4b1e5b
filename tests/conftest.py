"""Shared fixtures: Multi30k location, composed configs with tiny models, temporary caches."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from nmt.config import Config, register_configs

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
MULTI30K = Path(os.environ.get("MULTI30K_DIR", ROOT.parent / "shared" / "data" / "multi30k")).resolve()

register_configs()

TINY_MODEL = [
    "model.embedding_size=32",
    "model.encoder.hidden_size=32",
    "model.decoder.hidden_size=64",
    "model.decoder.output_size=32",
    "model.attention.hidden_size=32",
]


@pytest.fixture(autouse=True)
def _multi30k_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MULTI30K_DIR", str(MULTI30K))


def compose_config(overrides: list[str], config_name: str = "config") -> Config:
    """Compose `configs/{config_name}.yaml` with overrides into a validated Config object."""
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=overrides)
    obj = OmegaConf.to_object(cfg)
    assert isinstance(obj, Config)
    return obj


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A temporary folder for caches and runs."""
    return tmp_path


def toy_overrides(workdir: Path, task: str = "reverse", n_train: int = 2000, tiny: bool = True) -> list[str]:
    """Overrides for a small toy corpus (and a tiny model unless `tiny=False`: then the model comes
    from elsewhere, e.g. +experiment=toy), with everything written below `workdir`."""
    return [
        f"data=toy_{task}",
        f"data.dir={workdir / 'toy'}",
        f"data.cache_dir={workdir / 'prepared'}",
        f"data.toy.n_train={n_train}",
        "data.toy.n_valid=200",
        "data.toy.n_test=200",
        "train.progress=false",
        "train.threads=1",  # small models: one thread is as fast, and runs stay independent of the machine
        *(TINY_MODEL if tiny else []),
    ]


TOY_TRAIN = [  # the documented toy set-up (configs/experiment/toy.yaml), as the attention grid uses it
    "+experiment=toy",
    "data.toy.n_train=20000",
    "train.max_minutes=1.7",
]


def train_toy(workdir: Path, task: str, extra: list[str]) -> Path:
    """Train the toy model of TOY_TRAIN on a toy task below `workdir`; returns the run folder."""
    import time

    from nmt.trainer import train

    cfg = compose_config(toy_overrides(workdir, task=task, tiny=False) + TOY_TRAIN + extra)
    start = time.monotonic()
    state = train(cfg, workdir / "run")
    (workdir / "run" / "train_seconds.txt").write_text(f"{time.monotonic() - start:.1f}\n{state['best']}\n")
    return workdir / "run"


@pytest.fixture(scope="session")
def trained_toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model trained on toy_reverse (once per session); returns its run folder."""
    return train_toy(tmp_path_factory.mktemp("toy_reverse"), "reverse", [])


@pytest.fixture(scope="session")
def trained_toy_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model trained on toy_copy (once per session); returns its run folder."""
    return train_toy(tmp_path_factory.mktemp("toy_copy"), "copy", [])
