"""The attention explorer page, opened in a real browser (headless Chromium through Selenium): what a
person sees (the sentence list, the grid, hovering, the overlays, a comparison, the keyboard), and
`nmt.explore`'s bad input as one line.

Chromium and its driver come from Debian (`apt-get install chromium chromium-driver`; `.ci/run`
installs them). Where they are missing the browser tests are skipped, except under CI, where they
fail: CI must run them.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import assert_user_error, cli

selenium = pytest.importorskip("selenium", reason="selenium is a dev dependency")
from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402


def browser_binaries() -> tuple[str, str] | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    return (found[0], found[1]) if found[0] and found[1] else None


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    binaries = browser_binaries()
    if binaries is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium and chromedriver are missing: .ci/run must install them (apt-get install chromium chromium-driver)")
        pytest.skip("Chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
    options = Options()
    options.binary_location = binaries[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000", "--allow-file-access-from-files"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(binaries[1]), options=options)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def exports(trained_toy: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two exports of the toy test pairs (with gold): the default links, and those read one step later."""
    folder = tmp_path_factory.mktemp("exports")
    ckpt = trained_toy / "checkpoints" / "best.pt"
    for name, extra in (("argmax", []), ("shifted", ["align.shift=1"])):
        proc = cli("nmt.align", [f"ckpt={ckpt}", "split=test", "align.heatmaps=0", f"align.out={folder / name}", *extra])
        assert proc.returncode == 0, proc.stderr[-2000:]
    return folder / "argmax", folder / "shifted"


def open_page(driver: WebDriver, page: Path) -> None:
    driver.get(page.resolve().as_uri())
    assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"], driver.get_log("browser")
    assert driver.find_element(By.ID, "heading").text == "Sentence #0", "the page's script did not run"


def marks(driver: WebDriver, css: str, panel: int = 0) -> list[tuple[int, int]]:
    """The (source i, target j) cells of the marks `css` in a panel, sorted by target then source."""
    found = driver.find_elements(By.CSS_SELECTOR, ".panel")[panel].find_elements(By.CSS_SELECTOR, css)
    return sorted(((int(m.get_attribute("data-i")), int(m.get_attribute("data-j"))) for m in found), key=lambda c: (c[1], c[0]))


def pharaoh(path: Path, n: int) -> list[tuple[int, int]]:
    return sorted((tuple(map(int, t.split("-"))) for t in path.read_text().splitlines()[n].split()), key=lambda c: (c[1], c[0]))


def words(export: Path, n: int) -> tuple[list[str], list[str]]:
    record = json.loads((export / "matrices_word.jsonl").read_text().splitlines()[n])
    return record["src"], record["tgt"]


def test_align_writes_an_explorer_that_shows_every_sentence_and_its_grid(browser: WebDriver, exports: tuple[Path, Path]) -> None:
    argmax, _ = exports
    open_page(browser, argmax / "explorer.html")
    assert browser.find_element(By.ID, "count").text == "200 of 200 sentences"
    assert 0 < len(browser.find_elements(By.CSS_SELECTOR, "#list .sentence")) < 200  # drawn lazily
    src, tgt = words(argmax, 0)
    assert len(browser.find_elements(By.CSS_SELECTOR, ".panel rect.cell")) == len(src) * len(tgt)
    assert [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".panel .tgt-word")] == tgt
    assert "AER" in browser.find_element(By.CSS_SELECTOR, ".sentence-scores").text  # against the toy's gold


def test_hovering_a_cell_highlights_its_two_words_and_shows_its_weight(browser: WebDriver, exports: tuple[Path, Path]) -> None:
    argmax, _ = exports
    open_page(browser, argmax / "explorer.html")
    src, tgt = words(argmax, 0)
    cell = browser.find_element(By.CSS_SELECTOR, f'.panel rect.cell[data-i="{len(src) - 1}"][data-j="0"]')
    ActionChains(browser).move_to_element(cell).perform()
    assert [e.get_attribute("data-i") for e in browser.find_elements(By.CSS_SELECTOR, ".src-word.hl")] == [str(len(src) - 1)]
    assert [e.get_attribute("data-j") for e in browser.find_elements(By.CSS_SELECTOR, ".tgt-word.hl")] == ["0"]
    weight = int(cell.get_attribute("data-w")) / 1000
    assert browser.find_element(By.ID, "status").text == f"{tgt[0]} ← {src[-1]}: weight {weight:.3f}"


def test_the_overlays_change_what_is_drawn(browser: WebDriver, exports: tuple[Path, Path]) -> None:
    argmax, _ = exports
    open_page(browser, argmax / "explorer.html")
    src, tgt = words(argmax, 0)

    def count(css: str) -> int:
        return len(browser.find_elements(By.CSS_SELECTOR, css))

    assert marks(browser, ".mark-link") == pharaoh(argmax / "alignments.pharaoh", 0)  # where the export's links are
    gold = json.loads((argmax / "scores.json").read_text())["reference_file"]
    assert marks(browser, ".mark-sure") == pharaoh(Path(gold), 0)
    assert count(".mark-link") == count(".mark-sure") == len(tgt)
    assert count(".mark-diagonal") == 0
    browser.find_element(By.ID, "show-links").click()
    browser.find_element(By.ID, "show-reference").click()
    browser.find_element(By.ID, "show-diagonal").click()
    assert count(".mark-link") == 0 and count(".mark-sure") == 0
    assert marks(browser, ".mark-diagonal") == [(min(len(src) - 1, int((j + 0.5) * len(src) / len(tgt))), j) for j in range(len(tgt))]
    browser.execute_script("const t = document.getElementById('threshold'); t.value = '0.05'; t.dispatchEvent(new Event('input'));")
    assert browser.find_element(By.ID, "threshold-value").text == "0.05"
    heavy = [c for c in browser.find_elements(By.CSS_SELECTOR, ".panel rect.cell") if int(c.get_attribute("data-w")) >= 50]
    assert count(".mark-threshold") == len(heavy) > 0
    browser.find_element(By.ID, "show-links").click()  # links back: the threshold marks only what they lack
    assert count(".mark-threshold") == len(heavy) - len(tgt)


def test_subword_view_rows_keyboard_search_and_sorting(browser: WebDriver, exports: tuple[Path, Path]) -> None:
    argmax, _ = exports
    open_page(browser, argmax / "explorer.html")
    pieces = json.loads((argmax / "matrices.jsonl").read_text().splitlines()[0])
    browser.find_element(By.CSS_SELECTOR, "#view option[value='piece']").click()
    assert len(browser.find_elements(By.CSS_SELECTOR, ".panel rect.cell")) == len(pieces["src"]) * len(pieces["tgt"])
    browser.find_element(By.CSS_SELECTOR, "#view option[value='word']").click()
    browser.find_elements(By.CSS_SELECTOR, ".panel .tgt-word")[1].click()  # its row, one bar per source word
    assert len(browser.find_elements(By.CSS_SELECTOR, ".row-view .bar")) == len(words(argmax, 0)[0])
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.ARROW_DOWN)
    body.send_keys(Keys.ARROW_DOWN)
    assert browser.find_element(By.ID, "heading").text == "Sentence #2"
    body.send_keys(Keys.ARROW_UP)
    assert browser.find_element(By.ID, "heading").text == "Sentence #1"
    word = words(argmax, 7)[0][0]
    browser.find_element(By.ID, "search").send_keys(word)
    shown = browser.find_elements(By.CSS_SELECTOR, "#list .sentence")
    assert 0 < len(shown) < 200 and all(word in row.text.split() or word in row.get_attribute("title").split() for row in shown)
    browser.find_element(By.ID, "search").clear()
    browser.find_element(By.CSS_SELECTOR, "#sort option[value='length']").click()
    lengths = [len(r.text.split()) for r in browser.find_elements(By.CSS_SELECTOR, "#list .sentence")[:10]]
    assert lengths == sorted(lengths, reverse=True)


def test_a_comparison_shows_both_exports_and_sorts_by_their_disagreement(
    browser: WebDriver, exports: tuple[Path, Path], tmp_path: Path
) -> None:
    page = tmp_path / "compare.html"
    proc = cli("nmt.explore", [str(e) for e in exports] + [f"out={page}"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "200 sentence pairs, 2 export(s)" in proc.stdout
    open_page(browser, page)
    assert [h.text.split(" (")[0] for h in browser.find_elements(By.CSS_SELECTOR, ".panel h3")] == ["argmax", "shifted"]
    src, tgt = words(exports[0], 0)
    assert len(browser.find_elements(By.CSS_SELECTOR, ".panel rect.cell")) == 2 * len(src) * len(tgt)
    for panel, export in enumerate(exports):  # each panel draws its own export's links
        assert marks(browser, ".mark-link", panel) == pharaoh(export / "alignments.pharaoh", 0)
    assert marks(browser, ".mark-link", 0) != marks(browser, ".mark-link", 1)
    browser.find_element(By.CSS_SELECTOR, "#sort option[value='disagreement']").click()
    first = browser.find_element(By.CSS_SELECTOR, "#list .sentence")
    assert float(first.text.split("·")[1].split()[0]) > 0  # the two link sets differ most there


def test_exports_of_different_pairs_or_a_missing_folder_are_one_line(exports: tuple[Path, Path], tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    for name in ("matrices.jsonl", "matrices_word.jsonl", "alignments.pharaoh"):
        lines = (exports[0] / name).read_text().splitlines()
        (other / name).write_text("\n".join(lines[1:]) + "\n")  # the same file minus its first pair
    assert_user_error(cli("nmt.explore", [str(exports[0]), str(other), f"out={tmp_path / 'x.html'}"]),
                      "exports of different sentence pairs (they differ at sentence 0")
    assert_user_error(cli("nmt.explore", [str(tmp_path / "nope")]), "nope: no such folder")
    assert_user_error(cli("nmt.explore", [str(exports[0]), "colour=red"]), "colour=red: unknown option 'colour'")
    assert_user_error(cli("nmt.explore", [str(exports[0]), f"out={tmp_path}"]), "is a folder")
    assert not (tmp_path / "x.html").exists()
