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
import os
import signal
import sys
from collections.abc import Iterable, Iterator
from typing import IO, NoReturn

import hydra
from omegaconf import DictConfig

from nmt.config.commands import TranslateConfig
from nmt.data.corpus import decode_lines
from nmt.decoding.text import Translator, text_heatmap
from nmt.model.checkpoint import checkpoint_path, load_models
from nmt.system import cli
from nmt.system.errors import UserError
from nmt.system.files import atomic_output
from nmt.system.runtime import resolve_device


def warn_truncated(line: int, tokens: int, limit: int) -> None:
    print(f"warning: line {line}: {tokens} source tokens, truncated to {limit}", file=sys.stderr)


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


def check_streams(cfg: TranslateConfig) -> None:
    """The standard streams the command will use are open (a shell's `<&-` or `>&-` closes them)."""
    if cfg.input is None and sys.stdin is None:
        raise UserError("standard input is closed: give input=FILE, or pipe the text in")
    if cfg.output is None and sys.stdout is None:
        raise UserError("standard output is closed: give output=FILE")


def reader_gone() -> NoReturn:
    """The reader of standard output went away (`| head`): stop quietly, as a program killed by
    SIGPIPE does (exit 141), with nothing more written to the closed pipe."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the interpreter's last flush goes nowhere
    sys.exit(128 + signal.SIGPIPE)


def translate(cfg: TranslateConfig) -> None:
    """Run the translate command as `cfg` says. Input lines end at "\n" only, from a file exactly
    as from stdin; an output file appears whole when the input is done (never half-written)."""
    check_streams(cfg)
    ckpt = checkpoint_path(cfg.ckpt, cfg.runs_dir)
    model, run_cfg, src_tok, tgt_tok = load_models([ckpt, *cfg.ensemble], resolve_device(cfg.device))
    translator = Translator(model, src_tok, tgt_tok, cfg.decode, run_cfg.data.max_len, warn_truncated)
    if cfg.input is None and sys.stdin.isatty():
        run_interactive(translator)
        return
    try:
        with contextlib.ExitStack() as stack:
            raw = stack.enter_context(open(cfg.input, "rb")) if cfg.input else sys.stdin.buffer
            sink = stack.enter_context(atomic_output(cfg.output)) if cfg.output else sys.stdout
            run_stream(translator, decode_lines(raw, cfg.input or "stdin"), sink)
    except BrokenPipeError:
        if cfg.output is not None:
            raise
        reader_gone()


@hydra.main(config_path="../configs", config_name="translate", version_base="1.3")
@cli.exit_on_user_error
def main(cfg: DictConfig) -> None:
    config = cli.typed_config(cfg, TranslateConfig)
    cli.quiet_libraries(progress=False)
    translate(config)


if __name__ == "__main__":
    cli.run(main)
