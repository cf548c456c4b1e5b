#!/usr/bin/env bash
# nmt vs JoeyNMT 2.3.0 vs OpenNMT-py 3.5.1, same model sizes, data and machine: training tokens/s,
# peak memory, greedy and beam-5 decoding speed (medians of alternating rounds). Each peer goes into
# its own virtual environment, outside the project's dependencies, with the CPU torch 2.13.0 first
# (an unpinned torch pulls a multi-GB CUDA build):
#   JoeyNMT:    + importlib_metadata (imported, not declared), sentencepiece==0.2.0 (0.2.1+ lack a
#               method JoeyNMT 2.3.0 calls).
#   OpenNMT-py: installed with --no-deps (its wheel pins torch<2.3, a CUDA build on PyPI), then its
#               other requirements by hand, and sentencepiece for its subword transform; it runs
#               on torch 2.13 with TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 (it loads its checkpoints
#               with torch.load's old default).
# Usage: bash scripts/bench/bench_peers.sh [--rounds 3] [--updates 100] [--decode-updates 300]
set -euo pipefail
cd "$(dirname "$0")/../.."
JOEY=${JOEYNMT_VENV:-.bench-joeynmt}
ONMT=${ONMT_VENV:-.bench-onmt}
PY=${PYTHON:-.venv/bin/python}
if ! "$JOEY/bin/python" -c "import joeynmt" 2>/dev/null; then
    python3 -m venv "$JOEY"
    "$JOEY/bin/pip" install -q torch==2.13.0
    "$JOEY/bin/pip" install -q joeynmt==2.3.0 importlib_metadata sentencepiece==0.2.0
fi
if ! "$ONMT/bin/python" -c "import onmt, spacy, sentencepiece" 2>/dev/null; then
    python3 -m venv "$ONMT"
    "$ONMT/bin/pip" install -q torch==2.13.0
    "$ONMT/bin/pip" install -q --no-deps opennmt-py==3.5.1
    "$ONMT/bin/pip" install -q configargparse pyyaml sacrebleu six tensorboard "pyonmttok>=1.37,<2" "ctranslate2>=4,<5" \
        spacy rapidfuzz pyahocorasick fasttext-wheel flask waitress sentencepiece
fi
if [ -z "${MULTI30K_DIR:-}" ] && [ -d ../shared/data/multi30k ]; then
    export MULTI30K_DIR="$(cd ../shared/data/multi30k && pwd)"
fi
exec "$PY" scripts/bench/bench_peers.py --joeynmt-python "$JOEY/bin/python" --onmt-bin "$ONMT/bin" "$@"
