"""Weight averaging (a moving average during training, the mean of saved checkpoints) and ensembles."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from support import ROOT, cli, compose_config, toy_overrides

from nmt.decoding.search import beam_search
from nmt.model.checkpoint import load_checkpoint, load_model, load_models
from nmt.model.ensemble import Ensemble
from nmt.training.averaging import ParameterAverage, average_checkpoints
from nmt.training.session import train


def test_the_moving_average_by_hand() -> None:
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(1.0)
    ema = ParameterAverage(model, decay=0.9)
    with torch.no_grad():
        model.weight.fill_(3.0)
    ema.update(model)  # d_0 = min(0.9, 1/10) = 0.1: 0.1 * 1 + 0.9 * 3
    assert ema.shadow["weight"].item() == pytest.approx(2.8)
    with ema.swapped_into(model):
        assert model.weight.item() == pytest.approx(2.8)
    assert model.weight.item() == 3.0
    again = ParameterAverage(model, decay=0.9)
    again.restore(ema.state())
    assert again.updates == 1 and again.shadow["weight"].item() == pytest.approx(2.8)

@pytest.mark.slow

def test_training_with_a_moving_average_and_kept_checkpoints(workdir: Path) -> None:
    cfg = compose_config(toy_overrides(workdir, task="copy", n_train=300) + [
        "train.ema_decay=0.99", "train.keep_checkpoints=2", "train.max_steps=12", "train.valid_every=4", "train.test_at_end=false"])
    train(cfg, workdir / "run")
    folder = workdir / "run" / "checkpoints"
    assert sorted(p.name for p in folder.glob("step-*.pt")) == ["step-0000008.pt", "step-0000012.pt"]
    last = load_checkpoint(folder / "last.pt")
    assert last.ema is not None and int(last.ema["__updates__"]) == 12
    model, *_ = load_model(folder / "last.pt")  # evaluated with the average, not the last weights
    for name, p in model.named_parameters():
        torch.testing.assert_close(p, last.ema[name])
    averaged = average_checkpoints(sorted(folder.glob("step-*.pt")))
    a, b = (load_checkpoint(p).evaluated_weights() for p in sorted(folder.glob("step-*.pt")))
    for name, value in averaged.model.items():
        torch.testing.assert_close(value, (a[name] + b[name]) / 2)
    out = workdir / "avg.pt"
    proc = subprocess.run([sys.executable, "scripts/average_checkpoints.py", "--last", "2", str(workdir / "run"), "--output", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    translated = cli("nmt.translate", [f"ckpt={out}", "decode.beam_size=1"], input="w1 w2 w3\n")  # it loads and decodes
    assert translated.returncode == 0 and translated.stdout.count("\n") == 1, translated.stderr[-2000:]


def test_an_ensemble_of_a_model_with_itself_decodes_as_the_model(trained_toy: Path) -> None:
    ckpt = trained_toy / "checkpoints" / "best.pt"
    model, *_ = load_model(ckpt)
    pair, *_ = load_models([ckpt, ckpt])
    assert isinstance(pair, Ensemble)
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]])
    lens = torch.tensor([5, 3])
    alone = beam_search(model, src, lens, beam_size=3, alpha=0.6, n_best=2)
    together = beam_search(pair, src, lens, beam_size=3, alpha=0.6, n_best=2)
    for a, b in zip(alone, together):
        assert [h.ids for h in a] == [h.ids for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
        torch.testing.assert_close(a[0].alignment, b[0].alignment)
    proc = cli("nmt.translate", [f"ckpt={ckpt}", f"ensemble=[{ckpt}]", "decode.show_alignment=true"], input="w1 w2 w3\n")
    single = cli("nmt.translate", [f"ckpt={ckpt}", "decode.show_alignment=true"], input="w1 w2 w3\n")
    assert proc.returncode == 0 and proc.stdout == single.stdout == "w3 w2 w1\t2-0 1-1 0-2\n", proc.stderr[-2000:]


def test_an_ensemble_needs_one_vocabulary(trained_toy: Path) -> None:
    first, other = trained_toy / "checkpoints" / "best.pt", ROOT / "tests" / "data" / "checkpoint_v1.pt"  # 20 vs 8 toy symbols
    proc = cli("nmt.evaluate", [f"ckpt={first}", f"ensemble=[{other}]"])
    assert proc.returncode == 2 and f"{other}: its subword vocabularies differ from those of {first}" in proc.stderr
