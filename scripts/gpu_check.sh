#!/usr/bin/env bash
# The GPU self-check: the demo pipeline on CUDA in float32 and bfloat16 against the CPU reference in
# benchprof/assets/selfcheck_reference.json, timings of importance and evaluation, one table, JSON.
# Offline, a few minutes on one GPU. Options: --json PATH, --workdir DIR, --dtypes float32,bfloat16
# (python -m benchprof.lab.selfcheck --help). Without CUDA it exits 2 with one line saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_EVALUATE_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python=python3
if [ -x .venv/bin/python ]; then python=.venv/bin/python; fi
exec "$python" -m benchprof.lab.selfcheck "$@"
