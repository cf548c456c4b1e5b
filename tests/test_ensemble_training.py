"""`train.ensemble_size=N`: N models trained side by side into one run, decoded as an ensemble (the
preset +experiment=cpu_ensemble). The tests that train one are slow: `make test-all` runs them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from support import ROOT, assert_user_error, cli, compose_config, toy_overrides

from nmt.config.commands import EvalConfig
from nmt.decoding.scoring import evaluate_checkpoint
from nmt.model.checkpoint import ensemble_checkpoint, load_checkpoint, load_model, save_checkpoint
from nmt.model.ensemble import Ensemble
from nmt.system.errors import UserError
from nmt.training.processes import run_members
from nmt.training.side_by_side import member_config, train_ensemble, write_ensemble


@pytest.fixture(scope="module")
def ensemble_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two tiny toy-copy models trained together (12 steps each); returns the run folder."""
    workdir = tmp_path_factory.mktemp("ensemble")
    cfg = compose_config(toy_overrides(workdir, task="copy", n_train=300) + [
        "train.ensemble_size=2", "train.max_steps=12", "train.valid_every=6", "seed=7"])
    result = train_ensemble(cfg, workdir / "run")
    assert len(result.members) == 2
    return workdir / "run"

@pytest.mark.slow

def test_each_model_is_a_run_of_its_own_with_its_own_seed(ensemble_run: Path) -> None:
    seeds, weights = [], []
    for k in range(2):
        folder = ensemble_run / f"model{k}"
        assert (folder / "train.log").read_text().count("step 12 valid") == 1
        assert json.loads((folder / "metrics.json").read_text())["steps"] == 12
        last = load_checkpoint(folder / "checkpoints" / "last.pt")
        seeds.append(last.config["seed"])
        weights.append(last.model)
        assert last.config["train"]["ensemble_size"] == 1 and "test" not in json.loads((folder / "metrics.json").read_text())
    assert seeds == [7, 8]
    assert not any(torch.equal(weights[0][name], weights[1][name]) for name in weights[0] if weights[0][name].dim() == 2)  # other inits

@pytest.mark.slow

def test_the_ensemble_checkpoints_hold_every_model_and_decode_together(ensemble_run: Path) -> None:
    metrics = json.loads((ensemble_run / "metrics.json").read_text())
    assert metrics["ensemble_size"] == 2 and len(metrics["members"]) == 2 and metrics["steps"] == 12
    assert set(metrics["valid"]) == {"bleu", "chrf", "exact_match"} and "bleu" in metrics["test"]
    candidates = metrics["valid_candidates"]  # best.pt: the models' best.pt files, unless their last.pt files validate better
    chosen = "last.pt" if candidates["last.pt"]["bleu"] > candidates["best.pt"]["bleu"] else "best.pt"
    assert metrics["best_pt_holds"] == f"the models' {chosen}" and metrics["valid"] == candidates[chosen]
    for name, held in (("best.pt", chosen), ("last.pt", "last.pt")):
        model, cfg, *_ = load_model(ensemble_run / "checkpoints" / name)
        assert isinstance(model, Ensemble) and len(model.members) == 2 and cfg.seed == 7
        for k, member in enumerate(model.members):
            expected = load_checkpoint(ensemble_run / f"model{k}" / "checkpoints" / held).evaluated_weights()
            for key, value in member.state_dict().items():
                torch.testing.assert_close(value, expected[key])
    report = evaluate_checkpoint(EvalConfig(ckpt=str(ensemble_run / "checkpoints" / "best.pt"), split="valid", decode=cfg.train.decode))
    assert report["bleu"] == pytest.approx(metrics["valid"]["bleu"])  # metrics.json scores the ensemble, not one model

@pytest.mark.slow

def test_evaluate_and_align_pick_up_the_ensemble_as_the_newest_run(ensemble_run: Path) -> None:
    evaluated = cli("nmt.evaluate", [f"runs_dir={ensemble_run}", "decode.beam_size=2"])
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert json.loads((ensemble_run / "checkpoints" / "best.test.json").read_text())["checkpoint"].endswith("run/checkpoints/best.pt")
    aligned = cli("nmt.align", [f"ckpt={ensemble_run / 'checkpoints' / 'best.pt'}", "split=valid", "align.heatmaps=0"])
    assert aligned.returncode == 0, aligned.stderr[-2000:]


def _matrices(folder: Path) -> list[list[list[float]]]:
    return [json.loads(line)["matrix"] for line in (folder / "matrices.jsonl").read_text().splitlines()]

@pytest.mark.slow

def test_aligning_an_ensemble_reads_one_models_attention_or_the_mean_and_says_which(ensemble_run: Path, tmp_path: Path) -> None:
    best = ensemble_run / "checkpoints" / "best.pt"
    exported = {}
    for member, says in (("0", "model 0 of an ensemble of 2"), ("1", "model 1 of an ensemble of 2"),
                         ("mean", "the mean of the 2 models of an ensemble")):
        out = tmp_path / member
        proc = cli("nmt.align", [f"ckpt={best}", "split=valid", f"align.member={member}", f"align.out={out}", "align.heatmaps=1"])
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads((out / "scores.json").read_text())["attention"] == says
        assert f"({says} attention)" in proc.stdout and f"{says} attention" in (out / "report.html").read_text()
        exported[member] = torch.tensor(_matrices(out)[0])
    torch.testing.assert_close(exported["mean"], (exported["0"] + exported["1"]) / 2, rtol=0, atol=1e-4)  # (written rounded)
    assert not torch.allclose(exported["0"], exported["1"])  # two models, two attentions
    default = cli("nmt.align", [f"ckpt={best}", "split=valid", f"align.out={tmp_path / 'default'}", "align.heatmaps=0"])
    assert json.loads((tmp_path / "default" / "scores.json").read_text())["attention"] == "model 0 of an ensemble of 2", default.stderr
    assert_user_error(cli("nmt.align", [f"ckpt={best}", "split=valid", "align.member=2"]),
                      f"align.member=2: {best} holds an ensemble of 2 models (0 to 1)")
    assert_user_error(cli("nmt.align", [f"ckpt={best}", "split=valid", "align.member=first"]),
                      "align.member=first: expected a model's number (0, 1, ...) or mean")

@pytest.mark.slow

def test_an_ensemble_run_logs_the_heatmaps_of_its_mean_attention(ensemble_run: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(ensemble_run / "tensorboard"), size_guidance={"images": 0})
    events.Reload()
    assert {f"attention/{k}" for k in range(4)} <= set(events.Tags()["images"])
    assert [e.step for e in events.Images("attention/0")] == [12]
    for k in range(2):  # and each model its own, in its folder
        own = EventAccumulator(str(ensemble_run / f"model{k}" / "tensorboard"), size_guidance={"images": 0})
        own.Reload()
        assert "attention/0" in own.Tags()["images"]

@pytest.mark.slow

def test_the_ensembles_forced_attention_is_the_mean_of_its_models(ensemble_run: Path) -> None:
    model, *_ = load_model(ensemble_run / "checkpoints" / "best.pt")
    assert isinstance(model, Ensemble)
    src, lens, tgt_in = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]]), torch.tensor([4, 3]), torch.tensor([[1, 5, 6, 7], [1, 8, 9, 0]])
    with torch.no_grad():
        mean = torch.stack([m.attention_matrices(src, lens, tgt_in) for m in model.members]).mean(0)
        together = model.attention_matrices(src, lens, tgt_in)
    torch.testing.assert_close(together, mean)
    torch.testing.assert_close(together.sum(-1), torch.ones(2, 4))
    assert together[1, :, 3].abs().max() == 0  # padding: no weight


def _snapshot(run_dir: Path) -> dict[str, bytes]:
    """Every file of a run but its lock and the top log (Hydra adds the refused attempt's lines to
    it): what a refused training must leave as it was."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name != ".lock" and p != run_dir / "train.log"}

@pytest.mark.slow

def test_a_resume_that_cannot_continue_a_model_is_refused_before_any_model_starts(ensemble_run: Path) -> None:
    before = _snapshot(ensemble_run)
    overrides = [*toy_overrides(ensemble_run.parent, task="copy", n_train=300), "train.ensemble_size=2", "seed=7",
                 f"hydra.run.dir={ensemble_run}", "train.resume=auto", "model.decoder.hidden_size=48"]
    last = ensemble_run / "model0" / "checkpoints" / "last.pt"
    assert_user_error(cli("nmt.train", overrides),
                      f"{last}: checkpoint comes from an incompatible config (model.decoder.hidden_size: checkpoint 64, now 48)")
    assert _snapshot(ensemble_run) == before


@pytest.mark.slow
@pytest.mark.parametrize("size", [1, 3])
def test_an_ensemble_run_resumed_with_another_number_of_models_is_refused(ensemble_run: Path, size: int) -> None:
    before = _snapshot(ensemble_run)
    overrides = [*toy_overrides(ensemble_run.parent, task="copy", n_train=300), f"train.ensemble_size={size}", "seed=7",
                 f"hydra.run.dir={ensemble_run}", "train.resume=auto"]
    assert_user_error(cli("nmt.train", overrides), f"error: train.ensemble_size={size} cannot continue {ensemble_run}: it holds an "
                      "ensemble run of 2 models; resume it with train.ensemble_size=2, or start a new run in another hydra.run.dir")
    assert_user_error(cli("nmt.train", overrides[:-1]), f"error: {ensemble_run} already holds an ensemble run of 2 models")
    assert _snapshot(ensemble_run) == before

@pytest.mark.slow

def test_an_ensemble_checkpoint_holds_one_model_config(ensemble_run: Path, tmp_path: Path) -> None:
    first = ensemble_run / "model0" / "checkpoints" / "best.pt"
    other = load_checkpoint(ensemble_run / "model1" / "checkpoints" / "best.pt")
    other.config["model"]["attention"]["score"] = "dot"
    save_checkpoint(tmp_path / "dot.pt", other)
    with pytest.raises(UserError, match=r"dot.pt: its model config differs from that of .*model0/checkpoints/best.pt"):
        ensemble_checkpoint([first, tmp_path / "dot.pt"])


def test_member_configs_share_out_the_cores_and_resume_their_own_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3, 4})
    cfg = compose_config(["train.ensemble_size=2", "train.threads=0", f"train.resume={tmp_path}", "seed=3"])
    members = [member_config(cfg, k) for k in range(2)]
    assert [m.seed for m in members] == [3, 4] and [m.train.threads for m in members] == [2, 2]
    assert [m.train.resume for m in members] == [str(tmp_path / "model0"), str(tmp_path / "model1")]
    assert all(m.train.ensemble_size == 1 and not m.train.test_at_end and not m.train.progress for m in members)
    assert member_config(compose_config(["train.ensemble_size=8", "train.threads=0"]), 7).train.threads == 1

@pytest.mark.slow

def test_a_failing_model_fails_the_run_with_its_reason(workdir: Path) -> None:
    cfg = compose_config(toy_overrides(workdir, task="copy", n_train=100) + [f"train.init_from={workdir / 'gone.pt'}"])
    with pytest.raises(UserError, match=r"model 0 of the ensemble failed: .*gone.pt: checkpoint not found \(its log: .*model0/train.log\)"):
        run_members([cfg], workdir / "run")


def test_an_ensemble_resumes_from_a_run_directory_and_not_under_torchrun(workdir: Path) -> None:
    ckpt = workdir / "last.pt"
    ckpt.write_bytes(b"")
    assert_user_error(cli("nmt.train", ["train.ensemble_size=2", f"train.resume={ckpt}"]),
                      "resumes from its run directory, not from a checkpoint file")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WORLD_SIZE", "2")
        assert_user_error(cli("nmt.train", ["train.ensemble_size=2"]), "starts one process per model: run it without torchrun")


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting to be reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _model_processes(parent: int) -> list[int]:
    """The ensemble's model processes: the spawned children of `parent` (not multiprocessing's resource tracker)."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return [int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_killing_the_ensemble_with_sigkill_stops_its_models(workdir: Path) -> None:
    run_dir = workdir / "run"
    cmd = [sys.executable, "-m", "nmt.train", *toy_overrides(workdir, task="copy", n_train=300), "train.ensemble_size=2",
           "train.max_minutes=5", "train.valid_every=1000000", f"hydra.run.dir={run_dir}"]
    parent = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not all((run_dir / f"model{k}" / "train.log").is_file() and "training batches" in
                      (run_dir / f"model{k}" / "train.log").read_text() for k in range(2)):
            assert time.monotonic() < deadline and parent.poll() is None, "the models did not start training"
            time.sleep(0.5)
        models = _model_processes(parent.pid)
        assert len(models) == 2
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 20
    while any(_alive(pid) for pid in models) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in models), "a model kept training after the ensemble's process was killed"


@pytest.mark.slow
@pytest.mark.parametrize(("last_bleu", "held"), [(2.0, "last.pt"), (1.0, "best.pt")])
def test_best_pt_is_the_candidate_that_validates_better(ensemble_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        last_bleu: float, held: str) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(ensemble_run, run_dir)
    (run_dir / "checkpoints" / "best.val.hyp").write_text("a candidate's hypotheses\n")

    def scores(cfg: object, ckpt: Path, split: str) -> dict[str, float]:
        (ckpt.parent / f"{ckpt.stem}.val.hyp").write_text("hypotheses\n")
        (ckpt.parent / f"{ckpt.stem}.val.json").write_text("{}\n")
        return {"bleu": last_bleu if ckpt.name == "last.pt" else 1.0, "chrf": 0.0, "exact_match": 0.0}  # a tie keeps best.pt

    monkeypatch.setattr("nmt.training.side_by_side.scores_of", scores)
    chosen, candidates = write_ensemble(compose_config(["train.ensemble_size=2"]), run_dir)
    assert chosen == held and candidates["last.pt"]["bleu"] == last_bleu
    best = load_checkpoint(run_dir / "checkpoints" / "best.pt")
    expected = load_checkpoint(run_dir / "model1" / "checkpoints" / held).evaluated_weights()
    assert best.members is not None and all(torch.equal(best.members[0][k], expected[k]) for k in expected)
    assert (run_dir / "checkpoints" / "best.val.hyp").is_file() == (held == "best.pt")  # no report of the replaced candidate
