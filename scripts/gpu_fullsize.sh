#!/usr/bin/env bash
# The full-size path on a GPU: the recommended SmolLM2 profile on the full validation sets, one benchmark through
# both backends (hf and vllm, where vllm imports), every stage timed; writes <out>/fullsize.json. Offline.
# Options: --config, --out, --limit N, --device cuda|cpu, --parity BENCHMARK (benchprof/lab/fullsize.py).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_EVALUATE_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python=python3
if [ -x .venv/bin/python ]; then python=.venv/bin/python; fi
exec "$python" -c "import fire; from benchprof.lab.fullsize import full_size; fire.Fire(full_size, serialize=lambda _: None)" "$@"
