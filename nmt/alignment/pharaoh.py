"""Hard word alignments in the Pharaoh format: `i-j` (source word i, target word j; 0-based),
`ipj` for a possible (not sure) link, as fast_align and alignment scorers read and write."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from nmt.system.errors import UserError

Link = tuple[int, int]
_LINK = re.compile(r"^(\d+)([-p])(\d+)$")


def hard_links(matrix: np.ndarray, threshold: float | None = None) -> list[Link]:
    """Links (source word i, target word j) from a (target words, source words) matrix: the
    argmax of each target row, plus every cell >= threshold when one is given."""
    links: set[Link] = set()
    for j, row in enumerate(matrix):
        if row.size and row.max() > 0:
            links.add((int(row.argmax()), j))
        if threshold is not None:
            links.update((int(i), j) for i in np.nonzero(row >= threshold)[0])
    return sorted(links, key=lambda link: (link[1], link[0]))


def format_links(links: list[Link]) -> str:
    """[(0, 0), (2, 1)] -> '0-0 2-1'."""
    return " ".join(f"{i}-{j}" for i, j in links)


def parse_line(line: str, one_based: bool = False, where: str = "") -> tuple[set[Link], set[Link]]:
    """'0-0 1p2' -> (sure links, possible links). Possible excludes sure ones."""
    sure: set[Link] = set()
    possible: set[Link] = set()
    offset = 1 if one_based else 0
    for token in line.split():
        match = _LINK.match(token)
        if not match:
            raise UserError(f"{where}: '{token}' is not a Pharaoh link (expected i-j or ipj)")
        link = (int(match.group(1)) - offset, int(match.group(3)) - offset)
        if min(link) < 0:
            raise UserError(f"{where}: '{token}' has a negative index (are the links 1-based? set align.gold_one_based)")
        (sure if match.group(2) == "-" else possible).add(link)
    return sure, possible - sure


def read_pharaoh(path: str | Path, one_based: bool = False) -> list[tuple[set[Link], set[Link]]]:
    """Every line of a Pharaoh file as (sure, possible) link sets."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: alignment file not found")
    lines = path.read_text(encoding="utf-8").splitlines()
    return [parse_line(line, one_based, f"{path}:{n}") for n, line in enumerate(lines, start=1)]
