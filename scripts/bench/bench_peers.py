#!/usr/bin/env python
"""Side-by-side speed of nmt, JoeyNMT 2.3.0 and OpenNMT-py 3.5.1 on the same model sizes, data and machine.

Run through `scripts/bench/bench_peers.sh` (`make bench-peers`), which installs each peer into its own
virtual environment and passes its Python here. The model on every side: bidirectional GRU
encoder (embeddings 256, 256 per direction), GRU decoder 512, additive (Bahdanau/MLP) attention,
nmt's default dropout, label smoothing 0.1, Adam lr 1e-3 at a constant rate, gradient-norm clipping 1.0,
batches of 64 sentences, Multi30k de->en with one joint sentencepiece model (8k, trained by nmt
and given to the peers as their subword model and vocabulary).

What could not be matched exactly: JoeyNMT's `plateau` scheduler breaks on torch 2.13, so it runs
`scheduling: exponential` with `decrease_factor: 1.0` (a constant rate). OpenNMT-py's RNN decoder
is Luong-style: it attends from the current state s_i with input feeding (its default, kept), its
attention output layer tanh(W [c; s]) feeds a 512 -> vocabulary generator (untied; nmt has a
256-wide deep output tied to the target embeddings, JoeyNMT untied as configured here), and it
builds its vocabulary from the subword-tokenised training data (the 7,994 pieces that occur,
against 8,000); its bridge is on (`bridge: true`), as nmt's and JoeyNMT's.

Each round trains each system for `--updates` steps, one after the other, then decodes
test_2016_flickr (1,000 sentences, batches of 64, outputs up to 1.5 x the source length for nmt
and JoeyNMT, 60 pieces for OpenNMT-py, which takes an absolute limit) greedily and with beam 5,
with models trained for `--decode-updates` steps in the first round (the table gives their mean
output lengths: decoding time grows with them). Throughput: target tokens/s of training steps (the
peers' own logs, nmt's measured the same way by scripts/bench/bench_train.py); memory: peak RSS of each
training process. Prints a Markdown table of medians over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from nmt.config.schema import DataConfig, DecoderConfig
from nmt.data.corpus import split_files
from nmt.data.prepare import prepare

ROOT = Path(__file__).resolve().parents[2]
DROPOUT = DecoderConfig().dropout  # nmt's default (encoder, decoder and embeddings share it): the peers get the same

MODEL = ["data.batch_sentences=64", "data.batch_tokens=1000000", "train.lr=0.001"]
RSS = "import resource,subprocess,sys; r=subprocess.run(sys.argv[1:]).returncode; print('PEAK_RSS_KIB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r)"  # noqa: E501


def run(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> tuple[str, float]:
    """Run `cmd` under a peak-RSS probe -> (its stderr+stdout, peak RSS in MiB)."""
    proc = subprocess.run([sys.executable, "-c", RSS, *cmd], cwd=ROOT, capture_output=True, text=True, env=env)
    text = proc.stdout + proc.stderr
    log.write_text(text)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed (exit {proc.returncode}); see {log}")
    peak = int(re.findall(r"PEAK_RSS_KIB (\d+)", text)[-1]) / 1024
    return text, peak


def joey_config(work: Path, spm_model: Path, vocab: Path, model_dir: Path, updates: int, beam: int) -> dict:
    data = DataConfig()
    prefix = {s: str(split_files(data, s)[0].with_suffix("")) for s in ("train", "test")}
    prefix["valid"] = str(work / "dev20")  # a 20-sentence dev set: JoeyNMT's test mode decodes dev before test
    side = lambda lang: {  # noqa: E731
        "lang": lang, "max_length": 100, "lowercase": False, "normalize": False, "level": "bpe",
        "voc_file": str(vocab), "tokenizer_type": "sentencepiece", "tokenizer_cfg": {"model_file": str(spm_model)},
    }
    emb = {"embedding_dim": 256, "scale": False}
    return {
        "name": "bench", "joeynmt_version": "2.3.0", "use_cuda": False, "fp16": False, "random_seed": 42,
        "data": {"train": prefix["train"], "dev": prefix["valid"], "test": prefix["test"], "dataset_type": "plain",
                 "src": side("de"), "trg": side("en")},
        "training": {
            "model_dir": str(model_dir), "overwrite": True, "optimizer": "adam", "learning_rate": 0.001,
            "scheduling": "exponential", "decrease_factor": 1.0, "batch_size": 64, "batch_type": "sentence",
            "updates": updates, "epochs": 1000, "validation_freq": updates, "logging_freq": 10, "eval_metrics": ["bleu"],
            "early_stopping_metric": "loss", "shuffle": True, "label_smoothing": 0.1, "clip_grad_norm": 1.0,
            "normalization": "tokens", "num_workers": 0, "print_valid_sents": [], "keep_best_ckpts": 1,
        },
        "testing": {"load_model": str(model_dir / "best.ckpt"),
                    "beam_size": beam, "beam_alpha": 0.6 if beam > 1 else -1, "batch_size": 64, "batch_type": "sentence",
                    "eval_metrics": ["bleu"], "sacrebleu_cfg": {"tokenize": "13a"}},
        "model": {
            "initializer": "xavier_uniform", "embed_initializer": "normal", "embed_init_weight": 0.1,
            "bias_initializer": "zeros", "tied_embeddings": False, "tied_softmax": False,
            "encoder": {"type": "recurrent", "rnn_type": "gru", "embeddings": emb, "hidden_size": 256,
                        "bidirectional": True, "dropout": DROPOUT, "num_layers": 1},
            "decoder": {"type": "recurrent", "rnn_type": "gru", "embeddings": emb, "hidden_size": 512, "attention": "bahdanau",
                        "dropout": DROPOUT, "hidden_dropout": DROPOUT, "num_layers": 1, "input_feeding": True, "init_hidden": "bridge"},
        },
    }


def onmt_config(work: Path, spm_model: Path, model: Path, updates: int) -> dict:
    data = DataConfig()
    train_src, train_tgt = split_files(data, "train")
    return {
        "save_data": str(work / "onmt_data"), "src_vocab": str(work / "onmt_vocab.txt"), "tgt_vocab": str(work / "onmt_vocab.txt"),
        "share_vocab": True, "overwrite": True,
        "data": {"corpus_1": {"path_src": str(train_src), "path_tgt": str(train_tgt), "transforms": ["sentencepiece", "filtertoolong"]},
                 "valid": {"path_src": str(work / "dev20.de"), "path_tgt": str(work / "dev20.en"), "transforms": ["sentencepiece"]}},
        "src_subword_model": str(spm_model), "tgt_subword_model": str(spm_model), "src_seq_length": 100, "tgt_seq_length": 100,
        "save_model": str(model), "model_type": "text", "encoder_type": "brnn", "decoder_type": "rnn", "rnn_type": "GRU",
        "layers": 1, "enc_hid_size": 512, "dec_hid_size": 512, "word_vec_size": 256, "global_attention": "mlp", "input_feed": 1,
        "bridge": True, "dropout": [DROPOUT], "optim": "adam", "learning_rate": 0.001, "learning_rate_decay": 1.0,
        "batch_type": "sents", "batch_size": 64, "valid_batch_size": 64, "train_steps": updates, "valid_steps": 10**6,
        "save_checkpoint_steps": updates, "label_smoothing": 0.1, "max_grad_norm": 1.0, "report_every": 10, "seed": 42,
        "num_workers": 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--joeynmt-python", required=True, help="python of the JoeyNMT virtual environment")
    parser.add_argument("--onmt-bin", required=True, help="bin folder of the OpenNMT-py virtual environment")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--updates", type=int, default=100, help="training steps per throughput run")
    parser.add_argument("--decode-updates", type=int, default=300, help="training steps of the models decoding is timed with")
    parser.add_argument("--work", type=Path, default=ROOT / "bench" / "peers")
    args = parser.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)

    data = prepare(DataConfig())  # the defaults are Multi30k de->en, as configs/data/multi30k_de_en.yaml
    for lang in ("de", "en"):
        lines = (split_files(DataConfig(), "valid")[0].with_suffix(f".{lang}")).read_text(encoding="utf-8").splitlines()[:20]
        (work / f"dev20.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    spm_model = work / "spm.model"
    spm_model.write_bytes(data.tgt_tokenizer.model_proto)
    specials = {"<pad>", "<unk>", "<s>", "</s>"}
    pieces = [p for p in data.tgt_tokenizer.pieces(range(len(data.tgt_tokenizer))) if p not in specials]
    (work / "vocab.txt").write_text("".join(p + "\n" for p in pieces), encoding="utf-8")
    configs = {}  # "decode": trains the model both decoding runs use, then "beam1"/"beam5" decode with it
    runs = (("decode", "joey_model", args.decode_updates, 1), ("speed", "joey_speed", args.updates, 1),
            ("beam1", "joey_model", args.decode_updates, 1), ("beam5", "joey_model", args.decode_updates, 5))
    for name, model_dir, updates, beam in runs:
        configs[name] = work / f"joey_{name}.yaml"
        config = joey_config(work, spm_model, work / "vocab.txt", work / model_dir, updates, beam)
        configs[name].write_text(yaml.safe_dump(config))

    onmt = Path(args.onmt_bin)
    onmt_env = dict(os.environ, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1")  # OpenNMT-py 3.5.1 loads its checkpoints the pre-2.6 way
    for name, updates in (("decode", args.decode_updates), ("speed", args.updates)):
        configs[f"onmt_{name}"] = work / f"onmt_{name}.yaml"
        configs[f"onmt_{name}"].write_text(yaml.safe_dump(onmt_config(work, spm_model, work / f"onmt_{name}", updates)))
    run([str(onmt / "onmt_build_vocab"), "-config", str(configs["onmt_decode"]), "-n_sample", "-1"], work / "onmt_vocab.log", onmt_env)

    if args.rounds == 0:  # set-up only (the virtual environments, configs and vocabularies)
        return
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    rows: dict[str, dict[str, list[float]]] = {"nmt": {}, "JoeyNMT": {}, "OpenNMT-py": {}}

    def add(system: str, key: str, value: float) -> None:
        rows[system].setdefault(key, []).append(value)

    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr)
        # nmt: throughput and memory of training
        out, peak = run([sys.executable, "scripts/bench/bench_train.py", "--runs", "1", "--warmup", "10", "--steps", str(args.updates),
                         *MODEL], work / "nmt_bench_train.log", env)
        result = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
        add("nmt", "train_tokens_per_s", result["tokens_per_s"])
        add("nmt", "train_peak_rss_mib", peak)
        # JoeyNMT: the same (the first round's run also trains the model its decoding runs use)
        out, peak = run([args.joeynmt_python, "-m", "joeynmt", "train", str(configs["decode" if r == 0 else "speed"])],
                        work / "joey_train.log")
        speeds = [float(x) for x in re.findall(r"Tokens per Sec:\s+(\d+)", out)]
        add("JoeyNMT", "train_tokens_per_s", statistics.median(speeds[1:] or speeds))  # the first window includes warm-up
        add("JoeyNMT", "train_peak_rss_mib", peak)
        # decoding, from checkpoints trained for the same number of steps
        if r == 0:
            ours = work / "nmt_run"
            shutil.rmtree(ours, ignore_errors=True)
            run([sys.executable, "-m", "nmt.train", *MODEL, f"train.max_steps={args.decode_updates}",
                 f"train.valid_every={args.decode_updates}",
                 "train.test_at_end=false", "train.progress=false", f"hydra.run.dir={ours}"], work / "nmt_train.log", env)
        out, _ = run([sys.executable, "scripts/bench/bench_decode.py", "--ckpt", str(ours / "checkpoints" / "last.pt"), "--runs", "1",
                      "--batch-sentences", "64", "--max-len-extra", "0"], work / "nmt_decode.log", env)
        dec = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
        add("nmt", "greedy_sentences_per_s", dec["greedy_sentences_per_s"])
        add("nmt", "beam5_sentences_per_s", dec["beam5_sentences_per_s"])
        add("nmt", "greedy_mean_output_tokens", dec["greedy_mean_output_tokens"])
        add("nmt", "beam5_mean_output_tokens", dec["beam5_mean_output_tokens"])
        for beam, key in ((1, "greedy_sentences_per_s"), (5, "beam5_sentences_per_s")):
            hyps = work / f"joey_beam{beam}"
            out, _ = run([args.joeynmt_python, "-m", "joeynmt", "test", str(configs[f"beam{beam}"]), "-o", str(hyps)],
                         work / f"joey_test_beam{beam}.log")
            took = [float(x) for x in re.findall(r"Generation took ([\d.]+)\[sec\]", out)]
            add("JoeyNMT", key, 1000 / took[-1])  # the last decoded set is the test set (1,000 sentences)
            texts = Path(f"{hyps}.test").read_text(encoding="utf-8").splitlines()
            mean_len = sum(len(ids) for ids in data.tgt_tokenizer.encode(texts)) / len(texts)
            add("JoeyNMT", key.replace("sentences_per_s", "mean_output_tokens"), round(mean_len, 1))
        onmt_round(onmt, onmt_env, configs, work, r, args.decode_updates, data.tgt_tokenizer, add)
        print(json.dumps(rows), file=sys.stderr)

    med = {s: {k: statistics.median(v) for k, v in d.items()} for s, d in rows.items()}
    print("| measure | nmt | JoeyNMT 2.3.0 | OpenNMT-py 3.5.1 | nmt / JoeyNMT | nmt / OpenNMT-py |")
    print("|---|---|---|---|---|---|")
    for key, label in (("train_tokens_per_s", "training, target tokens/s"), ("greedy_sentences_per_s", "greedy decoding, sentences/s"),
                       ("beam5_sentences_per_s", "beam-5 decoding, sentences/s"), ("train_peak_rss_mib", "training peak RSS, MiB"),
                       ("greedy_mean_output_tokens", "greedy output, tokens/sentence"),
                       ("beam5_mean_output_tokens", "beam-5 output, tokens/sentence")):
        a, b, c = med["nmt"][key], med["JoeyNMT"][key], med["OpenNMT-py"][key]
        print(f"| {label} | {a:,.1f} | {b:,.1f} | {c:,.1f} | {a / b:.2f}x | {a / c:.2f}x |")
    (work / "results.json").write_text(json.dumps({"rounds": rows, "median": med}, indent=2))


def onmt_round(onmt: Path, env: dict[str, str], configs: dict[str, Path], work: Path, r: int, decode_updates: int,
               tokenizer: Any, add: Callable[[str, str, float], None]) -> None:
    """One round of OpenNMT-py: training throughput and memory, then greedy and beam-5 decoding."""
    out, peak = run([str(onmt / "onmt_train"), "-config", str(configs["onmt_decode" if r == 0 else "onmt_speed"])],
                    work / "onmt_train.log", env)
    speeds = [float(x) for x in re.findall(r"\d+/\s*(\d+) tok/s", out)]  # "src/tgt tok/s" per report
    add("OpenNMT-py", "train_tokens_per_s", statistics.median(speeds[1:] or speeds))
    add("OpenNMT-py", "train_peak_rss_mib", peak)
    model = work / f"onmt_decode_step_{decode_updates}.pt"
    test = split_files(DataConfig(), "test")[0]
    for beam, key in ((1, "greedy_sentences_per_s"), (5, "beam5_sentences_per_s")):
        hyps = work / f"onmt_beam{beam}.en"
        out, _ = run([str(onmt / "onmt_translate"), "-model", str(model), "-src", str(test), "-output", str(hyps), "-beam_size", str(beam),
                      "-batch_size", "64", "-batch_type", "sents", "-max_length", "60", "-transforms", "sentencepiece",
                      "-src_subword_model", str(work / "spm.model"), "-tgt_subword_model", str(work / "spm.model"), "-report_time"],
                     work / f"onmt_translate_beam{beam}.log", env)
        took = float(re.findall(r"Total translation time \(s\): ([\d.]+)", out)[-1])
        add("OpenNMT-py", key, 1000 / took)
        texts = hyps.read_text(encoding="utf-8").splitlines()
        mean_len = sum(len(ids) for ids in tokenizer.encode(texts)) / len(texts)
        add("OpenNMT-py", key.replace("sentences_per_s", "mean_output_tokens"), round(mean_len, 1))


if __name__ == "__main__":
    main()
