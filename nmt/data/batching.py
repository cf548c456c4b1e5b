"""Token-budget batches of similar-length pairs, padded into tensors.

Ids live in flat numpy arrays with offsets (taken from Arrow without copying per row), so a batch
is gathered without touching Python lists of every sentence.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import datasets
import numpy as np
import torch

from nmt.data.tokenizer import BOS, EOS, PAD


class RaggedIds:
    """Variable-length id lists as flat `values` plus `offsets` (n + 1,): row i is
    values[offsets[i]:offsets[i + 1]]."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray) -> None:
        self.values = values.astype(np.int64, copy=False)
        self.offsets = offsets.astype(np.int64, copy=False)

    @classmethod
    def of_column(cls, ds: datasets.Dataset, column: str) -> RaggedIds:
        """A list column of a dataset, read from Arrow without a Python list per row."""
        arr = ds.data.column(column).combine_chunks()
        return cls(arr.values.to_numpy(), arr.offsets.to_numpy())

    @classmethod
    def of_lists(cls, rows: list[list[int]]) -> RaggedIds:
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum([len(r) for r in rows], out=offsets[1:])
        values = np.fromiter((i for r in rows for i in r), dtype=np.int64, count=int(offsets[-1]))
        return cls(values, offsets)

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]


@dataclass
class Batch:
    """A padded batch. `src`: (B, S) ids ending in EOS; `src_lens`: (B,);
    `tgt_in`: (B, T) = BOS y_1..y_n; `tgt_out`: (B, T) = y_1..y_n EOS; `index`: (B,) row numbers;
    `guide`: (B, T, S) attention targets of guided alignment, when training uses it."""

    src: torch.Tensor
    src_lens: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    index: np.ndarray
    guide: torch.Tensor | None = None

    def to(self, device: torch.device) -> Batch:
        src, src_lens, tgt_in, tgt_out = (t.to(device, non_blocking=True) for t in (self.src, self.src_lens, self.tgt_in, self.tgt_out))
        guide = self.guide.to(device, non_blocking=True) if self.guide is not None else None
        return Batch(src, src_lens, tgt_in, tgt_out, self.index, guide)


class BatchSampler:
    """Splits a dataset into batches of at most `batch_tokens` padded tokens (longer side) and,
    when `max_sentences` > 0, at most that many sentences.

    With `shuffle`, each epoch sorts by length with random tie-breaking, cuts batches and
    shuffles their order (seeded by `seed + epoch`): little padding, a new order each epoch.
    Without it, batches follow length order (for decoding); `Batch.index` restores file order.
    """

    def __init__(self, ds: datasets.Dataset, batch_tokens: int, shuffle: bool, seed: int = 0, max_sentences: int = 0) -> None:
        self.use_ids(RaggedIds.of_column(ds, "src_ids"), RaggedIds.of_column(ds, "tgt_ids"))
        self.batch_tokens = batch_tokens
        self.max_sentences = max_sentences or len(self.src_lens) or 1
        self.shuffle = shuffle
        self.seed = seed

    def use_ids(self, src: RaggedIds, tgt: RaggedIds) -> None:
        """Batch these ids of the same rows from now on (an epoch's sampled segmentations,
        `nmt.data.sampling`): the batches follow their lengths."""
        self.src, self.tgt = src, tgt
        self.src_lens = src.lengths()
        self.tgt_lens = tgt.lengths() + 1  # + BOS/EOS

    def __len__(self) -> int:
        return len(self.batches(0))

    def batches(self, epoch: int) -> list[np.ndarray]:
        """Row indices of every batch of an epoch."""
        rng = np.random.default_rng(self.seed + epoch)
        n = len(self.src_lens)
        noise = rng.random(n) if self.shuffle else np.arange(n) / max(n, 1)
        order = np.lexsort((noise, self.tgt_lens, self.src_lens))
        width = np.maximum(self.src_lens, self.tgt_lens)[order]
        batches, start, longest = [], 0, 0
        for k in range(n):
            longest_k = max(longest, int(width[k]))
            if k > start and (longest_k * (k - start + 1) > self.batch_tokens or k - start == self.max_sentences):
                batches.append(order[start:k])
                start, longest_k = k, int(width[k])
            longest = longest_k
        if start < n:
            batches.append(order[start:])
        if self.shuffle:
            rng.shuffle(batches)  # type: ignore[arg-type]
        return batches

    def collate(self, index: np.ndarray) -> Batch:
        """Pad the rows `index` into a Batch."""
        b = len(index)
        s_len, t_len = self.src_lens[index], self.tgt_lens[index]
        src = np.full((b, int(s_len.max())), PAD, dtype=np.int64)
        tgt_in = np.full((b, int(t_len.max())), PAD, dtype=np.int64)
        tgt_out = np.full_like(tgt_in, PAD)
        for r, i in enumerate(index):
            src[r, : s_len[r]] = self.src[i]
            y = self.tgt[i]
            tgt_in[r, 0] = BOS
            tgt_in[r, 1 : len(y) + 1] = y
            tgt_out[r, : len(y)] = y
            tgt_out[r, len(y)] = EOS
        return Batch(
            torch.from_numpy(src), torch.from_numpy(s_len.astype(np.int64)),
            torch.from_numpy(tgt_in), torch.from_numpy(tgt_out), np.asarray(index),
        )

    def epoch(self, epoch: int, skip: int = 0) -> Iterator[Batch]:
        """The batches of an epoch, skipping the first `skip` (to resume mid-epoch)."""
        for index in self.batches(epoch)[skip:]:
            yield self.collate(index)
