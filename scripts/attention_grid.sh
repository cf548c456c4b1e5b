#!/usr/bin/env bash
# The full attention grid on the toy tasks: 5 scores x {soft, hard-gumbel, hard-reinforce, local-m,
# local-p} on toy_copy and toy_reverse (Hydra multirun, the two tasks side by side, one thread each).
# Each job stops at 98% validation exact match or after train.max_minutes (configs/experiment/toy.yaml).
# Writes the table to docs/attention_grid.md (and .csv). Usage: scripts/attention_grid.sh [extra overrides]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
out=${GRID_DIR:-multirun/attention_grid}
rm -rf "$out" && mkdir -p "$out"
for task in copy reverse; do
  "$PY" -m nmt.train -m +experiment=toy "data=toy_$task" \
    model.attention.score=dot,general,additive,location,scaled_dot \
    model/attention=soft,hard_gumbel,hard_reinforce,local_m,local_p \
    train.threads=1 "hydra.sweep.dir=$out/$task" "$@" > "$out/$task.log" 2>&1 &
done
wait
"$PY" scripts/sweep_table.py "$out" --md "$out/table.md" --csv docs/attention_grid.csv
