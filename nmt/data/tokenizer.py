"""Sentencepiece subword models: trained on the training split, stored as bytes in checkpoints.

Ids 0..3 are fixed for every model: PAD, UNK, BOS, EOS. With `joint_vocab` one model serves both
languages (and allows tied embeddings across sides); otherwise each side has its own.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator

import sentencepiece as spm
from google.protobuf.message import DecodeError
from sentencepiece import sentencepiece_model_pb2

from nmt.config.schema import DataConfig

PAD, UNK, BOS, EOS = 0, 1, 2, 3


def train_sentencepiece(lines: Iterable[str], cfg: DataConfig) -> bytes:
    """Train a sentencepiece model on `lines`; returns the serialized model proto."""
    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=buffer,
        vocab_size=cfg.vocab_size,
        model_type=cfg.subword_model.value,
        character_coverage=cfg.character_coverage,
        pad_id=PAD,
        unk_id=UNK,
        bos_id=BOS,
        eos_id=EOS,
        # Small corpora (toy tasks) have fewer pieces than asked: use what there is.
        hard_vocab_limit=False,
        input_sentence_size=cfg.subword_sample_sentences,  # reservoir sample: memory stays bounded
        shuffle_input_sentence=True,
        num_threads=2,
        minloglevel=2,
    )
    return buffer.getvalue()


def proto_problem(model_proto: bytes) -> str | None:
    """Why `model_proto` is not a sentencepiece model of this project (None: it is one). Checked in
    Python before sentencepiece sees it: its C++ loader logs to stderr when it rejects a model."""
    model = sentencepiece_model_pb2.ModelProto()  # type: ignore[attr-defined]
    try:
        model.ParseFromString(model_proto)
    except DecodeError:
        return "not a serialized sentencepiece model"
    spec = model.trainer_spec
    if len(model.pieces) <= EOS or (spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id) != (PAD, UNK, BOS, EOS):
        return f"{len(model.pieces)} pieces, special ids {(spec.pad_id, spec.unk_id, spec.bos_id, spec.eos_id)}; expected (0, 1, 2, 3)"
    return None


class Tokenizer:
    """Wraps a sentencepiece model: text <-> ids (no BOS/EOS added) and pieces."""

    def __init__(self, model_proto: bytes) -> None:
        problem = proto_problem(model_proto)
        if problem is not None:
            raise ValueError(problem)
        self.model_proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)

    def __len__(self) -> int:
        return int(self.sp.get_piece_size())

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Subword ids of each text."""
        return [list(ids) for ids in self.sp.encode(texts, out_type=int)]

    def sample(self, texts: list[str], alpha: float, nbest: int) -> list[list[int]]:
        """A segmentation of each text drawn from the `nbest` best (-1: all) with probabilities
        p^alpha (subword regularisation), from sentencepiece's generator (`nmt.data.sampling` seeds
        it). One thread: sentencepiece's multi-threaded sampling does not repeat under a seed."""
        return [list(ids) for ids in self.sp.encode(texts, out_type=int, enable_sampling=True, alpha=alpha, nbest_size=nbest,
                                                    num_threads=1)]

    def pieces(self, ids: Iterable[int]) -> list[str]:
        """Subword pieces of ids (for alignment labels)."""
        return [self.sp.id_to_piece(int(i)) for i in ids]

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Detokenized text of each id sequence (special ids are dropped)."""
        return [self.sp.decode([i for i in seq if i > EOS]) for seq in ids]


def side_lines(rows: Iterator[dict[str, str]], sides: tuple[str, ...]) -> Iterator[str]:
    """Non-empty texts of the given columns of rows, for training sentencepiece."""
    for row in rows:
        for side in sides:
            if row[side].strip():
                yield row[side]
