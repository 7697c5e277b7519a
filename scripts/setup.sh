#!/usr/bin/env bash
# Create .venv and install benchprof with its test extra. Safe to rerun.
# torch is installed first, pinned to 2.13.0 (a CPU build here); on a GPU node install the CUDA
# build of torch you want into the venv first and this script keeps it.
# Other packages stay within constraints.txt (the versions the tests last passed with), so a new
# release upstream cannot change CI or the demo; UNPINNED=1 installs the newest allowed instead.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# pip_install WHAT ARGS...: quiet pip without its "is ignored" noise; a failure stops setup with one
# line, so a failed torch pin never lets the next step pull a multi-GB default torch build.
pip_install() {
    local what=$1 status=0
    shift
    .venv/bin/pip install --quiet --disable-pip-version-check "$@" 2>&1 | grep -v "is ignored" \
        || status=${PIPESTATUS[0]}
    [ "$status" = 0 ] || { echo "setup.sh: installing $what failed (exit $status)" >&2; exit 1; }
}

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -c "import torch" 2>/dev/null || pip_install "torch==2.13.0" "torch==2.13.0"
if [ "${UNPINNED:-0}" = 1 ]; then
    pip_install benchprof -e ".[dev]"
else
    pip_install "benchprof within constraints.txt (tested on Python 3.11; try UNPINNED=1 bash scripts/setup.sh)" \
        -c constraints.txt -e ".[dev]"
fi
.venv/bin/python -c "import benchprof, torch; print(f'benchprof ready (torch {torch.__version__})')"
