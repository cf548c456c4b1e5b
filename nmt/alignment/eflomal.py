"""A statistical word aligner as the yardstick of attention: eflomal (Östling & Tiedemann 2016),
an optional extra (`pip install -e '.[align]'`; it builds from source).

`align_corpus` aligns a corpus's train, valid and test splits together (an unsupervised aligner
learns from all the text it aligns; no gold is used) in both directions, on lowercased
whitespace words, the words `nmt.alignment.words` merges attention into. It symmetrises the two
directions and caches `{split}.{fwd,rev,gdfa,intersection}` (Pharaoh, source-target, 0-based) in
the corpus's prepared-data folder, like the rest of the prepared data.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from nmt.alignment.pharaoh import Link, format_links, read_pharaoh
from nmt.alignment.symmetrize import symmetrize
from nmt.config.schema import DataConfig
from nmt.data.corpus import SPLITS, load_split
from nmt.data.prepare import prepared_folder
from nmt.system.errors import UserError
from nmt.system.files import atomic_write_text, file_lock

log = logging.getLogger(__name__)
DIRECTIONS = ("fwd", "rev")
SYMMETRIC = ("gdfa", "intersection")
INSTALL = "eflomal is not installed: pip install -e '.[align]' (it builds from source with a C compiler)"


def aligner_words(text: str) -> str:
    """The words the aligner sees: lowercased, split at whitespace."""
    return " ".join(text.lower().split())


def aligner_folder(cfg: DataConfig) -> Path:
    return prepared_folder(cfg) / "aligner"


def aligner_links(cfg: DataConfig, split: str, method: str = "gdfa") -> Path | None:
    """The cached links of a split (`method`: fwd, rev, gdfa or intersection), if `align_corpus` ran."""
    folder = aligner_folder(cfg)
    path = folder / f"{split}.{method}"
    return path if (folder / "DONE").exists() and path.is_file() else None


def _run_eflomal(src: list[str], tgt: list[str], folder: Path) -> tuple[list[str], list[str]]:
    try:
        import eflomal
    except ImportError:
        raise UserError(INSTALL) from None
    fwd, rev = folder / "fwd.all", folder / "rev.all"
    eflomal.Aligner().align(src, tgt, links_filename_fwd=str(fwd), links_filename_rev=str(rev), quiet=True)
    return fwd.read_text(encoding="utf-8").splitlines(), rev.read_text(encoding="utf-8").splitlines()


def align_corpus(cfg: DataConfig) -> Path:
    """Align the corpus's splits in both directions and symmetrise (cached); -> the folder."""
    folder = aligner_folder(cfg)
    if (folder / "DONE").exists():
        return folder
    with file_lock(folder / ".lock", wait=True):
        if not (folder / "DONE").exists():
            _align(cfg, folder)
    return folder


def _align(cfg: DataConfig, folder: Path) -> None:
    raw = {split: load_split(cfg, split) for split in SPLITS}
    links = align_pairs([t for split in SPLITS for t in raw[split]["src"]], [t for split in SPLITS for t in raw[split]["tgt"]])
    start = 0
    for split in SPLITS:
        end = start + len(raw[split])
        for method, found in links.items():
            lines = (format_links(sorted(s, key=lambda link: (link[1], link[0]))) + "\n" for s in found[start:end])
            atomic_write_text(folder / f"{split}.{method}", "".join(lines))
        start = end
    atomic_write_text(folder / "DONE", "eflomal\n")


def align_pairs(sources: list[str], targets: list[str]) -> dict[str, list[set[Link]]]:
    """eflomal's links of sentence pairs (texts), in both directions and symmetrised: method (fwd,
    rev, gdfa, intersection) -> per pair the links (source word i, target word j)."""
    log.info("aligning %d sentence pairs in both directions with eflomal", len(sources))
    with tempfile.TemporaryDirectory() as tmp:
        fwd, rev = _run_eflomal([aligner_words(t) for t in sources], [aligner_words(t) for t in targets], Path(tmp))
        directions = {}
        for name, lines in zip(DIRECTIONS, (fwd, rev), strict=True):
            path = Path(tmp) / name
            path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            directions[name] = [sure for sure, _ in read_pharaoh(path)]
    symmetric = {method: [set(s) for s in symmetrize(directions["fwd"], directions["rev"], method)] for method in SYMMETRIC}
    return {**directions, **symmetric}
