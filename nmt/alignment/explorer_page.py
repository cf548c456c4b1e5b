"""The attention explorer: one self-contained offline HTML page over one or more alignment exports
(`nmt.align` folders) of the same sentence pairs. The page's code is `explorer_page.js` beside this
module, inlined with the data: no network, no build step; it opens from the file system.

Per export it carries the word and subword matrices (weights x 1000, integers), every link file
the export wrote (`alignments.pharaoh` under the name of its links, and the two directions'
`alignments.forward.pharaoh` / `alignments.reverse.pharaoh`), and its scores; the reference links
(gold sure / possible, or the aligner's links, named as such) come from the first export that was
scored against a reference.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from nmt.alignment.pharaoh import Link, read_pharaoh
from nmt.system.errors import UserError
from nmt.system.files import atomic_write_text

PAGE_CODE = Path(__file__).with_name("explorer_page.js")
STYLE = """
body{font-family:sans-serif;margin:0;color:#222}header{padding:8px 16px;border-bottom:1px solid #ccc}
h1{font-size:18px;margin:4px 0}#exports{font-size:12px;color:#555}main{display:flex;height:calc(100vh - 70px)}
aside{width:340px;border-right:1px solid #ccc;display:flex;flex-direction:column}aside input,aside select{margin:4px 8px}
#count{font-size:12px;color:#555;margin:0 8px}#list{flex:1;overflow-y:auto;position:relative}
#list-rows{position:absolute;left:0;right:0}.sentence{height:26px;line-height:26px;padding:0 8px;font-size:12px;
white-space:nowrap;overflow:hidden;text-overflow:ellipsis;cursor:pointer;box-sizing:border-box}
.sentence:hover{background:#eef}.sentence.current{background:#cde}section{flex:1;overflow:auto;padding:8px 16px}
#controls{font-size:13px;display:flex;flex-wrap:wrap;gap:12px;align-items:center;margin-bottom:6px}
#status{font-family:monospace;height:18px;font-size:13px}#panels{display:flex;flex-wrap:wrap;gap:16px}
.panel h3{font-size:14px;margin:4px 0}.sentence-scores{font-size:12px;margin:2px 0;font-family:monospace}
.grid text{font-size:11px;fill:#333;cursor:default}.grid .tgt-word{cursor:pointer}.grid text.hl{fill:#c00;font-weight:bold}
.cell{stroke:#ddd;stroke-width:0.5}.cell:hover{stroke:#c00;stroke-width:2}
.mark-sure{fill:none;stroke:#d62;stroke-width:2;pointer-events:none}.mark-possible{fill:none;stroke:#d62;stroke-width:1;
stroke-dasharray:2 2;pointer-events:none}.mark-link{fill:#fc3;stroke:#333;stroke-width:0.5;pointer-events:none}
.mark-threshold{fill:none;stroke:#e80;stroke-width:1.5;pointer-events:none}.mark-diagonal{stroke:#393;stroke-width:1.5;
pointer-events:none}.row-view{font-size:12px;margin-top:6px}.bar{display:flex;align-items:center;gap:6px}
.bar-word{width:110px;text-align:right;overflow:hidden}.bar-fill{height:10px;background:#1846a0}.legend{font-size:12px;color:#555}
"""
BODY = """<header><h1 id="title"></h1><div id="exports"></div></header><main><aside>
<input id="search" type="text" placeholder="search words"><select id="sort">
<option value="index">in file order</option><option value="aer">by AER (worst first)</option>
<option value="entropy">by attention entropy (highest first)</option><option value="length">by length (longest first)</option>
<option value="disagreement">by disagreement of the exports (most first)</option></select>
<div id="count"></div><div id="list"><div id="list-spacer"></div><div id="list-rows"></div></div></aside>
<section><h2 id="heading"></h2><div><b>source</b> <span id="source"></span><br><b>target</b> <span id="target"></span></div>
<div id="controls"><label>view <select id="view"><option value="word">words</option><option value="piece">subwords</option></select></label>
<label><input id="show-links" type="checkbox" checked> links <select id="link-set"></select></label>
<label><input id="show-reference" type="checkbox" checked> reference: <span id="reference-label"></span></label>
<label><input id="show-diagonal" type="checkbox"> diagonal baseline</label>
<label>threshold <input id="threshold" type="range" min="0" max="1" step="0.05" value="0">
<span id="threshold-value">off</span></label></div>
<div class="legend">cells: attention weight · dot: a link · ring: a cell the threshold would add · square: reference (solid sure,
dashed possible) · green stroke: diagonal · click a target word for its row · arrow keys: next / previous sentence</div>
<div id="status"></div><div id="panels"></div></section></main>"""


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise UserError(f"{path.parent}: not an alignment export (no {path.name}; make one with python -m nmt.align)")
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _quantised(matrix: list[list[float]]) -> list[list[int]]:
    return [[round(w * 1000) for w in row] for row in matrix]


def _links(path: Path) -> list[list[Link]]:
    return [sorted(sure | possible) for sure, possible in read_pharaoh(path)]


def read_export(folder: Path, name: str, sentences: int | None) -> tuple[dict[str, Any], list[dict[str, list[str]]], dict[str, Any] | None]:
    """One export folder -> (its part of the page's data, its sentence pairs as words, its reference
    links or None), the first `sentences` pairs (all when None)."""
    if not folder.is_dir():
        raise UserError(f"{folder}: no such folder (expected an alignment export of python -m nmt.align)")
    pieces, words = _read_jsonl(folder / "matrices.jsonl")[:sentences], _read_jsonl(folder / "matrices_word.jsonl")[:sentences]
    scores = json.loads((folder / "scores.json").read_text(encoding="utf-8")) if (folder / "scores.json").is_file() else {}
    links = {scores.get("links", "links"): _links(folder / "alignments.pharaoh")[:sentences]}
    for direction in ("forward", "reverse"):
        if (folder / f"alignments.{direction}.pharaoh").is_file():
            links[direction] = _links(folder / f"alignments.{direction}.pharaoh")[:sentences]
    if any(len(found) != len(words) for found in links.values()):
        raise UserError(f"{folder}: its link files and matrices hold different numbers of sentences")
    summary = (f"AER {scores['aer']:.3f} against {scores['reference']} (diagonal {scores['diagonal']['aer']:.3f})"
               if "aer" in scores else "no reference")
    export = {"name": name, "attention": scores.get("attention", "attention"), "summary": summary, "links": links,
              "pieces": [{"src": r["src"], "tgt": r["tgt"]} for r in pieces],
              "matrices": {"word": [_quantised(r["matrix"]) for r in words], "piece": [_quantised(r["matrix"]) for r in pieces]}}
    reference = None
    ref_file = Path(scores["reference_file"]) if "reference_file" in scores else None
    if ref_file is not None and ref_file.is_file():
        gold = read_pharaoh(ref_file, bool(scores.get("reference_one_based", False)))[:len(words)]
        reference = {"kind": scores["reference"], "sure": [sorted(s) for s, _ in gold], "possible": [sorted(p) for _, p in gold]}
    return export, [{"src": r["src"], "tgt": r["tgt"]} for r in words], reference


def export_names(folders: list[Path]) -> list[str]:
    """Short distinct names: each folder with as many parent folders as it takes to tell them apart."""
    for depth in range(1, max(len(f.resolve().parts) for f in folders) + 1):
        names = ["/".join(f.resolve().parts[-depth:]) for f in folders]
        if len(set(names)) == len(names):
            return names
    return [str(f) for f in folders]


def explorer_data(folders: list[Path], title: str, sentences: int | None = None, names: list[str] | None = None) -> dict[str, Any]:
    """The page's data from export folders of the same sentence pairs (checked: the same words);
    `names`: what to call each export (default: its folder, with parents enough to tell them apart)."""
    exports, pairs, reference = [], None, None
    for folder, name in zip(folders, names or export_names(folders), strict=True):
        export, these, ref = read_export(folder, name, sentences)
        if pairs is None:
            pairs, first = these, folder
        elif these != pairs:
            where = next((n for n, (a, b) in enumerate(zip(these, pairs)) if a != b), min(len(these), len(pairs)))
            raise UserError(f"{folder} and {first}: exports of different sentence pairs (they differ at sentence {where}, 0-based)")
        reference = reference or ref
        exports.append(export)
    return {"title": title, "sentences": pairs, "reference": reference, "exports": exports}


def write_explorer(out: Path, data: dict[str, Any]) -> Path:
    """Write the page (data and code inlined) to `out` -> out."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(data['title'])}</title>"
            f"<style>{STYLE}</style></head><body>{BODY}"
            f'<script type="application/json" id="explorer-data">{payload}</script>'
            f"<script>{PAGE_CODE.read_text(encoding='utf-8')}</script></body></html>\n")
    atomic_write_text(out, page)
    return out
