"""`python -m nmt.explore EXPORT [EXPORT ...] [out=explore.html] [title=...] [sentences=N]`.

One offline page (nmt.alignment.explorer_page) that explores one or more alignment exports of the same
sentence pairs side by side: `nmt.align` folders of a guided and a plain model, of two attention
variants, of an ensemble's members. `nmt.align` already writes `explorer.html` of its own export;
this command compares several. Options are `key=value` (out: the page, default explore.html;
title; sentences: only the first N pairs).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from nmt.alignment.explorer_page import explorer_data, write_explorer
from nmt.system import cli
from nmt.system.errors import UserError

USAGE = "usage: python -m nmt.explore EXPORT [EXPORT ...] [out=explore.html] [title=TEXT] [sentences=N]"


@dataclass
class ExploreOptions:
    exports: list[Path] = field(default_factory=list)
    out: Path = Path("explore.html")
    title: str = ""
    sentences: int | None = None


def parse(argv: list[str]) -> ExploreOptions:
    """Folders and `key=value` options -> ExploreOptions; a bad one is a UserError naming it."""
    opts = ExploreOptions()
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq:
            opts.exports.append(Path(arg))
        elif key == "out":
            opts.out = Path(value)
        elif key == "title":
            opts.title = value
        elif key == "sentences":
            if not value.isdigit() or int(value) < 1:
                raise UserError(f"sentences={value}: expected a number of sentence pairs >= 1")
            opts.sentences = int(value)
        else:
            raise UserError(f"{arg}: unknown option '{key}' (expected out=, title= or sentences=); {USAGE}")
    if not opts.exports:
        raise UserError(f"no export folder given; {USAGE}")
    if opts.out.is_dir():
        raise UserError(f"out={opts.out}: is a folder; give the page's file name (e.g. {opts.out / 'explore.html'})")
    return opts


@cli.exit_on_user_error
def main(argv: list[str]) -> None:
    opts = parse(argv)
    title = opts.title or "Attention: " + ", ".join(str(p) for p in opts.exports)
    data = explorer_data(opts.exports, title, opts.sentences)
    write_explorer(opts.out, data)
    print(f"wrote {opts.out}: {len(data['sentences'])} sentence pairs, {len(data['exports'])} export(s)"
          f" ({opts.out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    cli.quiet_failures()
    main(sys.argv[1:])
