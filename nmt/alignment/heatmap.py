"""Attention heatmaps as matplotlib Figures (object API: no pyplot global state)."""

from __future__ import annotations

import io

import numpy as np
from matplotlib.figure import Figure


def heatmap_figure(matrix: np.ndarray, src_tokens: list[str], tgt_tokens: list[str], title: str = "") -> Figure:
    """matrix (len(tgt_tokens), len(src_tokens)) of weights in [0, 1] -> a labelled Figure:
    source tokens along the x axis (top), target tokens down the y axis, colour scale 0..1."""
    rows, cols = matrix.shape
    fig = Figure(figsize=(max(3.0, 0.32 * cols + 1.8), max(2.5, 0.3 * rows + 1.2)), dpi=100)
    ax = fig.add_subplot()
    image = ax.imshow(matrix, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto", interpolation="nearest")
    ax.set_xticks(range(cols), labels=src_tokens, rotation=90, fontsize=8)
    ax.set_yticks(range(rows), labels=tgt_tokens, fontsize=8)
    ax.xaxis.tick_top()
    ax.set_xlabel("source")
    ax.set_ylabel("target")
    if title:
        ax.set_title(title, fontsize=9, pad=12)
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    fig.tight_layout()
    return fig


def figure_png(fig: Figure) -> bytes:
    """The figure rendered as PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()
