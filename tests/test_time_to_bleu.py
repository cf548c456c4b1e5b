"""The lead that scripts/bench/plot_time_to_bleu.py reports: one curve minus another, each interpolated
linearly at the other's validations (issue 26's "3 BLEU above at every validation after minute 4")."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench" / "plot_time_to_bleu.py"


@pytest.fixture(scope="module")
def plot():
    spec = importlib.util.spec_from_file_location("plot_time_to_bleu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
