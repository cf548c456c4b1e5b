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
    """A model trained on toy_copy in Luong's order (once per session); returns its run folder.

    Copying is the task where Bahdanau's order is ambiguous: its query s_{i-1} has not read y_{i-1},
    and the bidirectional state h_{i-1} already holds x_i, so attending a position early copies as
    well as attending x_i. Which of the two a tied model learns depends on the seed and the CPU's
    kernels (validation AER 0.217, 0.000, 0.011, 0.186 for seeds 42, 1, 2, 3 on an AMD EPYC, whose
    seed 42 failed this test with a test AER of 0.204; 0.052 for seed 42 on an Intel Xeon).
    Attending from s_i, which has read y_{i-1}, removes the ambiguity (0.031,
    0.000, 0.000, 0.000 for the same seeds), so the export's AER is tested on a model whose attention
    is an alignment.
    """
    return train_toy(tmp_path_factory.mktemp("toy_copy"), "copy", ["model.attention.attend_from=current"])
