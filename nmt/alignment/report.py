"""Write an alignment export: matrices (subword and word level), Pharaoh links, heatmaps, HTML report."""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path
from typing import Any

from nmt.alignment.heatmap import figure_png, heatmap_figure
from nmt.alignment.pharaoh import Link, format_links
from nmt.alignment.words import SentenceAlignment
from nmt.system.files import atomic_output, atomic_write_bytes, atomic_write_text


def _rounded(matrix: Any) -> list[list[float]]:
    return [[round(float(x), 5) for x in row] for row in matrix]


def write_export(
    out: Path, alignments: list[SentenceAlignment], links: list[list[Link]], sources: list[str], targets: list[str],
    heatmaps: int, scores: dict[str, Any], title: str,
) -> None:
    """Write matrices.jsonl, matrices_word.jsonl, alignments.pharaoh, heatmaps/NNNN.png, report.html."""
    out.mkdir(parents=True, exist_ok=True)
    with atomic_output(out / "matrices.jsonl") as sub, atomic_output(out / "matrices_word.jsonl") as word:
        for n, a in enumerate(alignments):
            record = {"id": n, "src": a.src_pieces, "tgt": a.tgt_pieces, "matrix": _rounded(a.matrix)}
            sub.write(json.dumps(record, ensure_ascii=False) + "\n")
            src_words, tgt_words, matrix = a.words()
            word.write(json.dumps({"id": n, "src": src_words, "tgt": tgt_words, "matrix": _rounded(matrix)}, ensure_ascii=False) + "\n")
    atomic_write_text(out / "alignments.pharaoh", "".join(format_links(sentence) + "\n" for sentence in links))
    (out / "heatmaps").mkdir(exist_ok=True)
    sections = []
    for n, a in enumerate(alignments[:heatmaps]):
        png = figure_png(heatmap_figure(a.matrix, a.src_pieces, a.tgt_pieces, f"sentence {n}"))
        atomic_write_bytes(out / "heatmaps" / f"{n:04d}.png", png)
        sections.append(
            f"<section><h2>Sentence {n}</h2><p><b>source</b> {html.escape(sources[n])}<br>"
            f"<b>target</b> {html.escape(targets[n])}<br><b>links</b> <code>{format_links(links[n])}</code></p>"
            f'<img alt="attention heatmap of sentence {n}" src="data:image/png;base64,{base64.b64encode(png).decode()}"></section>'
        )
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in scores.items())
    atomic_write_text(
        out / "report.html",
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>" + html.escape(title) + "</title><style>"
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
        "table{border-collapse:collapse}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}"
        "section{border-top:1px solid #ddd;margin-top:1.5em}img{max-width:100%}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><table>{rows}</table>{''.join(sections)}</body></html>\n",
    )
