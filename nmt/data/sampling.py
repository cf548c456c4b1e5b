"""Subword regularisation (Kudo 2018): every epoch trains on a new sampled segmentation of each
training sentence, drawn by sentencepiece from its n-best (or full) segmentation lattice with
probabilities smoothed by alpha (`data.sampling_alpha`, `data.sampling_nbest`).

Validation, test, alignment and translation read the usual (most likely) segmentation, which the
prepared splits hold; only training samples. Epoch e's segmentation is a function of (seed, e)
alone, so a resumed run re-draws exactly the batches it had, and the next epoch's is drawn in a
background thread while the current one trains, so that the step loop never waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

import datasets
import numpy as np
import sentencepiece as spm

from nmt.data.batching import RaggedIds
from nmt.data.tokenizer import EOS, Tokenizer

# sentencepiece keeps one random generator per process: draws that set its seed must not interleave.
_SEED_LOCK = threading.Lock()
T = TypeVar("T")


class SegmentationSampler:
    """Sampled ids of the rows of an encoded training split (columns `src`, `tgt`, `src_ids`,
    `tgt_ids`), one segmentation per epoch; a sampled side longer than `max_len` (source with
    EOS, target with EOS) keeps the row's usual ids, so that the filtered split stays valid."""

    def __init__(self, ds: datasets.Dataset, src_tok: Tokenizer, tgt_tok: Tokenizer, alpha: float, nbest: int, max_len: int,
                 seed: int) -> None:
        self.texts = (ds.data.column("src").to_pylist(), ds.data.column("tgt").to_pylist())
        self.usual = (RaggedIds.of_column(ds, "src_ids"), RaggedIds.of_column(ds, "tgt_ids"))
        self.tokenizers = (src_tok, tgt_tok)
        self.alpha, self.nbest, self.max_len, self.seed = alpha, nbest, max_len, seed

    def draw(self, epoch: int) -> tuple[RaggedIds, RaggedIds]:
        """Epoch `epoch`'s (source ids ending in EOS, target ids) of every row: one sentencepiece
        draw per side, seeded by (seed, epoch, side)."""
        sides = []
        for side, (texts, tok) in enumerate(zip(self.texts, self.tokenizers)):
            with _SEED_LOCK:
                spm.set_random_generator_seed(_seed(self.seed, epoch, side))
                rows = tok.sample(texts, self.alpha, self.nbest)
            sides.append([r + [EOS] for r in rows] if side == 0 else rows)
        src, tgt = sides
        too_long = [k for k in range(len(src)) if len(src[k]) > self.max_len or len(tgt[k]) + 1 > self.max_len]
        for k in too_long:  # the filter measured the usual ids; keep them where a sample is longer
            src[k], tgt[k] = self.usual[0][k].tolist(), self.usual[1][k].tolist()
        return RaggedIds.of_lists(src), RaggedIds.of_lists(tgt)


class EpochPrefetch(Generic[T]):
    """`make(epoch)` for the epoch asked for, with `make(epoch + 1)` started in a background thread
    as soon as it is handed out (sentencepiece and numpy release the GIL for most of the work)."""

    def __init__(self, make: Callable[[int], T]) -> None:
        self.make = make
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="next-epoch")
        self._next: tuple[int, Future[T]] | None = None

    def get(self, epoch: int) -> T:
        ready = self._next[1].result() if self._next is not None and self._next[0] == epoch else self.make(epoch)
        self._next = (epoch + 1, self._pool.submit(self.make, epoch + 1))
        return ready

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _seed(seed: int, epoch: int, side: int) -> int:
    """A 32-bit seed of its own for each (run seed, epoch, side); sentencepiece takes an unsigned int."""
    return int(np.random.SeedSequence([seed, epoch, side]).generate_state(1)[0])
