"""Symmetrising two directions' word alignments, as statistical aligners do (Och & Ney 2003;
Koehn et al. 2005): the links of a source->target aligner and of a target->source one, both
written as (source word i, target word j), combined into one set.

- intersection: links both directions found (high precision);
- union: links either found (high recall);
- grow-diag-final-and (gdfa): start from the intersection, grow it with union links that are
  neighbours (also diagonal ones) of current links and cover a word still unaligned, then add
  union links whose two words are both still unaligned. The usual choice for phrase extraction and
  for a reference alignment.
"""

from __future__ import annotations

from collections.abc import Callable

from nmt.alignment.pharaoh import Link

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def intersection(forward: set[Link], reverse: set[Link]) -> set[Link]:
    return forward & reverse


def union(forward: set[Link], reverse: set[Link]) -> set[Link]:
    return forward | reverse


def grow_diag_final_and(forward: set[Link], reverse: set[Link]) -> set[Link]:
    """Koehn's grow-diag-final-and of two link sets over (source i, target j)."""
    both = forward | reverse
    links = forward & reverse
    src_done = {i for i, _ in links}
    tgt_done = {j for _, j in links}

    def add(link: Link) -> None:
        links.add(link)
        src_done.add(link[0])
        tgt_done.add(link[1])

    grown = True
    while grown:  # grow-diag: until no neighbour can be added
        grown = False
        for i, j in sorted(links):
            for di, dj in NEIGHBOURS:
                candidate = (i + di, j + dj)
                if candidate in both and candidate not in links and (candidate[0] not in src_done or candidate[1] not in tgt_done):
                    add(candidate)
                    grown = True
    for direction in (forward, reverse):  # final-and: both words still unaligned
        for i, j in sorted(direction):
            if i not in src_done and j not in tgt_done:
                add((i, j))
    return links


METHODS: dict[str, Callable[[set[Link], set[Link]], set[Link]]] = {
    "intersection": intersection, "union": union, "gdfa": grow_diag_final_and,
}


def symmetrize(forward: list[set[Link]], reverse: list[set[Link]], method: str) -> list[list[Link]]:
    """Per sentence, the two directions' links (both as (source i, target j)) combined by `method`
    (intersection, union or gdfa), sorted by target then source word."""
    combine = METHODS[method]
    return [sorted(combine(f, r), key=lambda link: (link[1], link[0])) for f, r in zip(forward, reverse, strict=True)]
