"""Translating lines of text with a trained model: n-best hypotheses with their alignments, the
output lines `nmt.translate` writes, and a text heatmap of the attention."""

from __future__ import annotations

from collections.abc import Callable

import torch

from nmt.alignment.pharaoh import format_links, hard_links
from nmt.alignment.words import EOS_PIECE, SentenceAlignment
from nmt.config.commands import TranslateOptions
from nmt.data.tokenizer import EOS, PAD, Tokenizer
from nmt.decoding.search import Hypothesis
from nmt.decoding.splits import search_batch
from nmt.model.ensemble import DecodingModel

SHADES = " .:-=+*#%@"  # weight 0 .. 1 in ten steps
Result = list[tuple[Hypothesis, SentenceAlignment]]  # the n-best of one line ([] for an empty line)
OnTruncate = Callable[[int, int, int], None]  # (1-based line number, source tokens, limit)


def token_batches(lengths: list[int], budget: int) -> list[list[int]]:
    """Indices of `lengths` in batches of similar length, each at most `budget` padded tokens
    (a longer sentence alone)."""
    order = sorted(range(len(lengths)), key=lambda k: lengths[k])
    batches: list[list[int]] = []
    for k in order:
        if batches and max(lengths[batches[-1][-1]], lengths[k]) * (len(batches[-1]) + 1) <= budget:
            batches[-1].append(k)
        else:
            batches.append([k])
    return batches


class Translator:
    """A loaded model with its tokenizers and decoding options. Sources longer than `max_len`
    tokens (or than the model accepts) are truncated, and `on_truncate` is told."""

    def __init__(self, model: DecodingModel, src_tok: Tokenizer, tgt_tok: Tokenizer, opts: TranslateOptions, max_len: int,
                 on_truncate: OnTruncate | None = None) -> None:
        self.model, self.src_tok, self.tgt_tok, self.opts = model, src_tok, tgt_tok, opts
        limits = [opts.max_input_len or max_len, model.max_source_len]
        self.max_len = min(n for n in limits if n is not None)
        self.device = next(model.parameters()).device
        self.on_truncate = on_truncate

    def _ids(self, lines: list[str], numbers: list[int]) -> list[list[int]]:
        """Source ids (ending in EOS, truncated to max_len) of lines whose 1-based numbers are `numbers`."""
        ids = self.src_tok.encode(lines)
        for number, seq in zip(numbers, ids):
            if len(seq) + 1 > self.max_len and self.on_truncate is not None:
                self.on_truncate(number, len(seq) + 1, self.max_len)
        return [seq[: self.max_len - 1] + [EOS] for seq in ids]

    def translate(self, lines: list[str], first_line: int = 0) -> list[Result]:
        """n-best (hypothesis, alignment) lists per line ([] for an empty line); `first_line`: the
        0-based number of lines[0] in the input, for messages."""
        out: list[Result] = [[] for _ in lines]
        todo = [k for k, line in enumerate(lines) if line.strip()]
        ids = self._ids([lines[k] for k in todo], [first_line + k + 1 for k in todo]) if todo else []
        for batch in token_batches([len(seq) for seq in ids], self.opts.batch_tokens):
            src = torch.full((len(batch), max(len(ids[r]) for r in batch)), PAD, dtype=torch.long)
            for row, r in enumerate(batch):
                src[row, : len(ids[r])] = torch.tensor(ids[r])
            lens = torch.tensor([len(ids[r]) for r in batch])
            nbest = search_batch(self.model, src.to(self.device), lens.to(self.device), self.opts, self.opts.n_best)
            for r, hyps in zip(batch, nbest):
                src_pieces = self.src_tok.pieces(ids[r][:-1]) + [EOS_PIECE]
                out[todo[r]] = [(h, SentenceAlignment(src_pieces, self.tgt_tok.pieces(h.ids) + [EOS_PIECE], h.alignment.numpy()))
                                for h in hyps]
        return out

    def format(self, index: int, result: Result) -> list[str]:
        """Output lines of input line `index`: the translation, or with n_best > 1 the lines
        `index ||| translation ||| score`; a tab and the Pharaoh links with show_alignment."""
        if not result:
            return [f"{index} |||  ||| 0.0"] * self.opts.n_best if self.opts.n_best > 1 else [""]
        lines = []
        for hyp, alignment in result:
            text = self.tgt_tok.decode([hyp.ids])[0]
            if self.opts.show_alignment:
                text += "\t" + format_links(hard_links(alignment.words()[2]))
            lines.append(f"{index} ||| {text} ||| {hyp.score:.4f}" if self.opts.n_best > 1 else text)
        return lines


def text_heatmap(alignment: SentenceAlignment) -> str:
    """The word-level attention as characters: rows = target words, columns = source words."""
    src, tgt, matrix = alignment.words()
    width = max((len(w) for w in tgt), default=0)
    header = " " * (width + 1) + " ".join(f"{j:<2}" for j in range(len(src)))
    rows = [f"{w:>{width}} " + " ".join(SHADES[min(int(x * 10), 9)] * 2 for x in row) for w, row in zip(tgt, matrix)]
    legend = "  ".join(f"{j}={w}" for j, w in enumerate(src))
    return "\n".join([header, *rows, legend])
