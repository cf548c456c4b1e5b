#!/usr/bin/env bash
# nmt vs JoeyNMT 2.3.0, same model/data/machine: training tokens/s, peak memory, greedy and beam-5
# decoding speed (medians of alternating rounds). JoeyNMT goes into its own virtual environment,
# outside the project's dependencies:
#   - torch==2.13.0 first (the CPU build this project uses; an unpinned torch pulls CUDA),
#   - importlib_metadata (JoeyNMT imports it without declaring it),
#   - sentencepiece==0.2.0 (0.2.1+ lack a method JoeyNMT 2.3.0 calls).
# Usage: bash scripts/bench_vs_joeynmt.sh [--rounds 3] [--updates 150]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${JOEYNMT_VENV:-.bench-joeynmt}
PY=${PYTHON:-.venv/bin/python}
if [ ! -x "$VENV/bin/joeynmt" ] && ! "$VENV/bin/python" -c "import joeynmt" 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q torch==2.13.0
    "$VENV/bin/pip" install -q joeynmt==2.3.0 importlib_metadata sentencepiece==0.2.0
fi
if [ -z "${MULTI30K_DIR:-}" ] && [ -d ../shared/data/multi30k ]; then
    export MULTI30K_DIR="$(cd ../shared/data/multi30k && pwd)"
fi
exec "$PY" scripts/bench_vs_joeynmt.py --joeynmt-python "$VENV/bin/python" "$@"
