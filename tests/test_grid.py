"""Every score x mode variant composes from config and learns: its loss falls in a few dozen steps."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import MULTI30K, ROOT, TINY_MODEL, compose_config, toy_overrides
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from nmt.training.session import train

SCORES = ["dot", "general", "additive", "location", "scaled_dot"]
MODES = ["soft", "hard_gumbel", "hard_reinforce", "local_m", "local_p"]


# Two variants in the fast suite (the default, and the one with most parts: location + local-p);
# all 25 with `make test-all`.
FAST = {("additive", "soft"), ("location", "local_p")}
VARIANTS = [pytest.param(s, m, marks=() if (s, m) in FAST else pytest.mark.slow) for s, m in itertools.product(SCORES, MODES)]


@pytest.mark.parametrize(("score", "mode"), VARIANTS)
def test_every_variant_learns_on_toy_copy(tmp_path_factory: pytest.TempPathFactory, score: str, mode: str) -> None:
    workdir = tmp_path_factory.getbasetemp() / "grid"  # one toy corpus for the whole grid
    run_dir = tmp_path_factory.mktemp(f"{score}-{mode}")
    cfg = compose_config([
        *toy_overrides(workdir, task="copy", n_train=1000, tiny=False), "+experiment=toy", f"model.attention.score={score}",
        f"model/attention={mode}", "train.max_steps=80", "train.log_every=10", "train.valid_every=80", "train.test_at_end=false",
        "train.stop_at_exact_match=0", "data.batch_tokens=600",
    ])
    state = train(cfg, run_dir)
    assert state.step == 80
    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    losses = [e.value for e in acc.Scalars("train/loss")]
    assert losses[-1] < 0.9 * losses[0], losses  # from ~log(vocab); a model that learns nothing stays flat


PRESETS = {  # preset -> (score, mode, sub-variant, attends from)
    "bahdanau": ("additive", "soft", "", "previous"),
    "luong_dot": ("dot", "soft", "", "current"),
    "luong_general": ("general", "soft", "", "current"),
    "luong_location": ("location", "soft", "", "current"),
    "luong_local_m": ("general", "local", "monotonic", "current"),
    "luong_local_p": ("general", "local", "predictive", "current"),
    "scaled_dot": ("scaled_dot", "soft", "", "previous"),
    "hard_gumbel": ("additive", "hard", "gumbel", "previous"),
    "hard_reinforce": ("additive", "hard", "reinforce", "previous"),
    "soft": ("additive", "soft", "", "previous"),
    "local_m": ("additive", "local", "monotonic", "previous"),
    "local_p": ("additive", "local", "predictive", "previous"),
}


def test_presets_are_exactly_the_documented_ones() -> None:
    assert sorted(p.stem for p in (ROOT / "configs" / "model" / "attention").glob("*.yaml")) == sorted(PRESETS)


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_composes_and_plain_keys_override_it(preset: str) -> None:
    att = compose_config([f"model/attention={preset}"]).model.attention
    variant = {"hard": att.hard_estimator.value, "local": att.local.value}.get(att.mode.value, "")
    assert (att.score.value, att.mode.value, variant, att.attend_from.value) == PRESETS[preset]
    overridden = compose_config([f"model/attention={preset}", "model.attention.score=location"]).model.attention
    assert overridden.score.value == "location" and overridden.mode.value == PRESETS[preset][1]


@pytest.mark.slow
def test_the_grid_trains_a_few_steps_on_a_multi30k_slice(tmp_path: Path) -> None:
    """All 25 variants, as one Hydra multirun on 400 Multi30k pairs: each job runs and writes metrics."""
    corpus = tmp_path / "m30k"
    corpus.mkdir()
    for split, source, n in (("train", "train", 400), ("valid", "val", 40), ("test", "test_2016_flickr", 40)):
        for lang in ("de", "en"):
            lines = (MULTI30K / f"{source}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
            (corpus / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    sweep = tmp_path / "sweep"
    proc = subprocess.run([
        sys.executable, "-m", "nmt.train", "-m", "data=custom", f"data.dir={corpus}", "data.src_lang=de",
        "data.tgt_lang=en", "data.vocab_size=300", f"data.cache_dir={tmp_path / 'prepared'}", *TINY_MODEL,
        f"model.attention.score={','.join(SCORES)}", f"model/attention={','.join(MODES)}", "train.max_steps=2",
        "train.valid_every=2", "train.progress=false", "train.threads=1", "train.decode.max_len_extra=2",
        "train.decode.max_len_ratio=1.0",
        f"hydra.sweep.dir={sweep}",
    ], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = sorted(sweep.glob("*/metrics.json"))
    assert len(jobs) == 25
    seen = {(m["score"], m["mode"], m["variant"]) for m in (json.loads(p.read_text()) for p in jobs)}
    assert len(seen) == 25
    table = subprocess.run([sys.executable, "scripts/sweep_table.py", str(sweep)], cwd=ROOT, capture_output=True, text=True)
    assert table.returncode == 0 and table.stdout.count("\n| custom |") == 25


@pytest.mark.parametrize("extra", [["model.attention.coverage=true"], ["model.encoder.self_attention=true"]])
def test_coverage_and_self_attention_learn(tmp_path_factory: pytest.TempPathFactory, extra: list[str]) -> None:
    workdir = tmp_path_factory.getbasetemp() / "grid"
    run_dir = tmp_path_factory.mktemp("extra")
    cfg = compose_config([
        *toy_overrides(workdir, task="copy", n_train=1000, tiny=False), "+experiment=toy", "train.max_steps=80",
        "train.log_every=10", "train.valid_every=80", "train.test_at_end=false", "train.stop_at_exact_match=0",
        "data.batch_tokens=600", *extra,
    ])
    train(cfg, run_dir)
    acc = EventAccumulator(str(run_dir / "tensorboard"))
    acc.Reload()
    losses = [e.value for e in acc.Scalars("train/loss")]
    assert losses[-1] < 0.9 * losses[0], losses  # from ~log(vocab); a model that learns nothing stays flat
