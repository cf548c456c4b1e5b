"""Fixtures: the Multi30k location for every test, temporary folders, toy models trained once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import MULTI30K, train_toy


@pytest.fixture(autouse=True)
def _multi30k_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MULTI30K_DIR", str(MULTI30K))


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A temporary folder for caches and runs."""
    return tmp_path


@pytest.fixture(scope="session")
def trained_toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model trained on toy_reverse (once per session); returns its run folder."""
    return train_toy(tmp_path_factory.mktemp("toy_reverse"), "reverse", [])


@pytest.fixture(scope="session")
def trained_toy_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model trained on toy_copy (once per session); returns its run folder."""
    return train_toy(tmp_path_factory.mktemp("toy_copy"), "copy", [])
