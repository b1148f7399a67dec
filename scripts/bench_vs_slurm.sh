#!/bin/sh
# gridsched and a local Slurm side by side: see scripts/bench_vs_slurm.py.
exec "${PYTHON:-python3}" "$(dirname "$0")/bench_vs_slurm.py" "$@"
