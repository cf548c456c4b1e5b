"""The lead that scripts/bench/plot_time_to_bleu.py reports: one curve minus another, each interpolated
linearly at the other's validations (issue 26's "3 BLEU above at every validation after minute 4"),
and the nmt run that scripts/bench/time_to_bleu.py races."""

import importlib.util
import sys
from pathlib import Path

import pytest
from support import compose_config

BENCH = Path(__file__).resolve().parents[1] / "scripts" / "bench"


def load_script(name: str):
    """scripts/bench/NAME.py as a module, its folder on sys.path while it loads (scripts import their siblings)."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH))
    return module


@pytest.fixture(scope="module")
def plot():
    return load_script("plot_time_to_bleu")


def test_interpolate_is_linear_between_validations_and_none_outside(plot) -> None:
    curve = [(2.0, 10.0), (6.0, 30.0)]
    assert plot.interpolate(curve, 2.0) == 10.0
    assert plot.interpolate(curve, 3.0) == pytest.approx(15.0)
    assert plot.interpolate(curve, 6.0) == 30.0
    assert plot.interpolate(curve, 1.9) is None
    assert plot.interpolate(curve, 6.1) is None


def test_leads_at_both_curves_validations_after_the_minute(plot) -> None:
    ours = [(2.0, 20.0), (5.0, 32.0), (8.0, 35.0)]
    theirs = [(3.0, 15.0), (6.0, 27.0), (9.0, 33.0)]
    points = plot.leads(ours, theirs, after=4.0)
    # minute 5: 32 against 15 + 12 * 2/3 = 23; minute 6: 33 against 27; minute 8: 35 against 31;
    # minute 9 lies after our last validation and is left out, minutes 2 and 3 before `after`.
    assert [m for m, _ in points] == [5.0, 6.0, 8.0]
    assert [lead for _, lead in points] == pytest.approx([9.0, 6.0, 4.0])
    assert plot.leads(ours, [], after=4.0) == []


@pytest.fixture(scope="module")
def race():
    return load_script("time_to_bleu")


def test_nmt_runs_its_default_with_the_overrides_last_so_that_they_win(race, tmp_path: Path) -> None:
    plain = race.nmt_command(tmp_path, 15, 681, [])
    varied = race.nmt_command(tmp_path, 15, 681, ["model.attention.attend_from=current", "train.valid_every=100"])
    assert plain[1:3] == ["-m", "nmt.train"] and "train.max_minutes=15" in plain and "train.valid_every=681" in plain
    assert varied[4:] == plain[4:] + ["model.attention.attend_from=current", "train.valid_every=100"]
    cfg = compose_config([o for o in varied[3:] if not o.startswith("hydra.")])
    assert cfg.model.attention.attend_from.value == "current" and cfg.train.valid_every == 100


def test_a_run_with_overrides_trains_beside_the_defaults_run_never_into_it(race, tmp_path: Path) -> None:
    assert race.nmt_command(tmp_path, 15, 681, [])[3] == f"hydra.run.dir={tmp_path / 'nmt'}"
    luong = race.nmt_command(tmp_path, 15, 681, ["model.attention.attend_from=current"])[3]
    assert luong == f"hydra.run.dir={tmp_path / 'nmt+model.attention.attend_from-current'}"
    names = {race.nmt_run_name(o) for o in ([], ["a=1"], ["a=2"], ["a=1", "b=x/y z"])}
    assert names == {"nmt", "nmt+a-1", "nmt+a-2", "nmt+a-1+b-x_y_z"}


def test_overrides_without_an_nmt_run_are_refused_before_anything_trains(race, monkeypatch, capsys) -> None:
    monkeypatch.setattr(race, "prepare", lambda cfg: pytest.fail("prepared data although the arguments were refused"))
    monkeypatch.setattr(sys, "argv", ["time_to_bleu.py", "--joeynmt-python", "python", "--onmt-bin", "bin", "--systems", "joeynmt",
                                      "model.attention.attend_from=current"])
    with pytest.raises(SystemExit) as exit_:
        race.main()
    assert exit_.value.code == 2
    assert "are for nmt's run, and --systems does not train nmt" in capsys.readouterr().err
