"""`python -m nmt.translate ckpt=PATH [input=FILE] [output=FILE] decode.beam_size=5`.

Translates one line out per line in, streaming: it reads `decode.lines_per_batch` lines, writes
their translations and flushes before reading on. An empty line gives an empty line. Lines longer
than the model's training limit are truncated with a warning on stderr. `decode.n_best=N` writes N
lines per input line, `i ||| translation ||| score` (i = 0-based input line, score = log p / lp);
`decode.show_alignment=true` appends a tab and the Pharaoh word alignment (source-target, 0-based).
On a terminal (stdin a TTY, no input file) it runs interactively: a prompt, the translation and a
text heatmap of the attention.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import Iterable, Iterator
from typing import IO

import hydra
import torch
from omegaconf import DictConfig

from nmt import cli
from nmt.alignment.extract import EOS_PIECE, SentenceAlignment
from nmt.alignment.pharaoh import format_links, hard_links
from nmt.checkpoint import checkpoint_path, load_model
from nmt.config import DecodeOptions, TranslateConfig
from nmt.data.corpus import decode_lines
from nmt.data.tokenizer import EOS, PAD, Tokenizer
from nmt.files import atomic_output
from nmt.model.seq2seq import Seq2Seq
from nmt.runtime import resolve_device
from nmt.search import Hypothesis, beam_search

SHADES = " .:-=+*#%@"  # weight 0 .. 1 in ten steps


class Translator:
    """A loaded model with its tokenizers and decoding options."""

    def __init__(self, model: Seq2Seq, src_tok: Tokenizer, tgt_tok: Tokenizer, opts: DecodeOptions, max_len: int) -> None:
        self.model, self.src_tok, self.tgt_tok, self.opts = model, src_tok, tgt_tok, opts
        limits = [opts.max_input_len or max_len, model.max_source_len]
        self.max_len = min(n for n in limits if n is not None)
        self.device = next(model.parameters()).device

    def translate(self, lines: list[str], first_line: int = 0) -> list[list[tuple[Hypothesis, SentenceAlignment]]]:
        """n-best (hypothesis, alignment) lists per line; [] for an empty line."""
        out: list[list[tuple[Hypothesis, SentenceAlignment]]] = [[] for _ in lines]
        todo = [k for k, line in enumerate(lines) if line.strip()]
        if not todo:
            return out
        ids = self.src_tok.encode([lines[k] for k in todo])
        for k, seq in zip(todo, ids):
            if len(seq) + 1 > self.max_len:
                print(f"warning: line {first_line + k + 1}: {len(seq) + 1} source tokens, truncated to {self.max_len}", file=sys.stderr)
        ids = [seq[: self.max_len - 1] + [EOS] for seq in ids]
        width = max(len(seq) for seq in ids)
        src = torch.full((len(ids), width), PAD, dtype=torch.long)
        for r, seq in enumerate(ids):
            src[r, : len(seq)] = torch.tensor(seq)
        lens = torch.tensor([len(seq) for seq in ids])
        o = self.opts
        alpha = o.alpha if o.beam_size > 1 else 0.0  # beam 1 is greedy: no length penalty
        nbest = beam_search(self.model, src.to(self.device), lens.to(self.device), o.beam_size, alpha,
                            o.max_len_ratio, o.max_len_extra, o.n_best)
        for k, seq, hyps in zip(todo, ids, nbest):
            src_pieces = self.src_tok.pieces(seq[:-1]) + [EOS_PIECE]
            out[k] = [(h, SentenceAlignment(src_pieces, self.tgt_tok.pieces(h.ids) + [EOS_PIECE], h.alignment.numpy())) for h in hyps]
        return out

    def format(self, index: int, result: list[tuple[Hypothesis, SentenceAlignment]]) -> list[str]:
        """Output lines of one input line."""
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


def chunks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    it = iter(lines)
    while chunk := list(itertools.islice(it, size)):
        yield chunk


def run_stream(translator: Translator, source: Iterable[str], sink: IO[str]) -> int:
    """Translate every line of `source` into `sink`, a chunk at a time; returns the line count."""
    n = 0
    for chunk in chunks(source, translator.opts.lines_per_batch):
        for k, result in enumerate(translator.translate(chunk, n)):
            sink.write("".join(line + "\n" for line in translator.format(n + k, result)))
        sink.flush()
        n += len(chunk)
    return n


def run_interactive(translator: Translator) -> None:
    """A prompt, the translation, and the attention as a text heatmap; Ctrl-D ends."""
    print("Type a sentence (Ctrl-D to quit).", file=sys.stderr)
    while True:
        try:
            line = input("> ")
        except EOFError:
            print(file=sys.stderr)
            return
        result = translator.translate([line])[0]
        if result:
            hyp, alignment = result[0]
            print(translator.tgt_tok.decode([hyp.ids])[0])
            print(text_heatmap(alignment))


def translate(cfg: TranslateConfig) -> None:
    """Run the translate command as `cfg` says. Input lines end at "\n" only, from a file exactly
    as from stdin; an output file appears whole when the input is done (never half-written)."""
    ckpt = checkpoint_path(cfg.ckpt, cfg.runs_dir)
    model, run_cfg, src_tok, tgt_tok = load_model(ckpt, resolve_device(cfg.device))
    translator = Translator(model, src_tok, tgt_tok, cfg.decode, run_cfg.data.max_len)
    if cfg.input is None and sys.stdin.isatty():
        run_interactive(translator)
        return
    with contextlib.ExitStack() as stack:
        raw = stack.enter_context(open(cfg.input, "rb")) if cfg.input else sys.stdin.buffer
        sink = stack.enter_context(atomic_output(cfg.output)) if cfg.output else sys.stdout
        run_stream(translator, decode_lines(raw, cfg.input or "stdin"), sink)


@hydra.main(config_path="../configs", config_name="translate", version_base="1.3")
@cli.exit_on_user_error
def main(cfg: DictConfig) -> None:
    config = cli.typed_config(cfg, TranslateConfig)
    cli.quiet_libraries(progress=False)
    translate(config)


if __name__ == "__main__":
    cli.run(main)
