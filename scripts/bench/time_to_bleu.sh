#!/usr/bin/env bash
# Validation BLEU vs wall-clock minutes for nmt, JoeyNMT 2.3.0 and OpenNMT-py 3.5.1 (scripts/bench/time_to_bleu.py),
# with the peers' virtual environments of scripts/bench/bench_peers.sh (installed there if missing).
# Usage: bash scripts/bench/time_to_bleu.sh [--minutes 20]
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -x "${JOEYNMT_VENV:-.bench-joeynmt}/bin/python" ] || [ ! -x "${ONMT_VENV:-.bench-onmt}/bin/onmt_train" ]; then
    echo "installing the peers first (scripts/bench/bench_peers.sh --rounds 0)" >&2
    bash scripts/bench/bench_peers.sh --rounds 0 > /dev/null
fi
if [ -z "${MULTI30K_DIR:-}" ] && [ -d ../shared/data/multi30k ]; then
    export MULTI30K_DIR="$(cd ../shared/data/multi30k && pwd)"
fi
exec "${PYTHON:-.venv/bin/python}" scripts/bench/time_to_bleu.py --joeynmt-python "${JOEYNMT_VENV:-.bench-joeynmt}/bin/python" \
    --onmt-bin "${ONMT_VENV:-.bench-onmt}/bin" "$@"
