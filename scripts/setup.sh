#!/usr/bin/env bash
# Create .venv and install benchprof with its test extra. Safe to rerun.
# torch is installed first, pinned to 2.13.0 (a CPU build here); on a GPU node install the CUDA
# build of torch you want into the venv first and this script keeps it.
# Other packages stay within constraints.txt (the versions the tests last passed with), so a new
# release upstream cannot change CI or the demo; UNPINNED=1 installs the newest allowed instead.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
    status=0
    .venv/bin/pip install --quiet --disable-pip-version-check "torch==2.13.0" 2>&1 | grep -v "is ignored" \
        || status=${PIPESTATUS[0]}
    # stop here: going on would let the next install pull a multi-GB default torch build
    [ "$status" = 0 ] || { echo "setup.sh: installing torch==2.13.0 failed (exit $status)" >&2; exit 1; }
fi
PIN=(-c constraints.txt)
[ "${UNPINNED:-0}" = 1 ] && PIN=()
status=0
.venv/bin/pip install --quiet --disable-pip-version-check "${PIN[@]}" -e ".[dev]" 2>&1 | grep -v "is ignored" \
    || status=${PIPESTATUS[0]}
if [ "$status" != 0 ]; then
    hint=""
    [ ${#PIN[@]} -gt 0 ] && hint="; constraints.txt was tested on Python 3.11: try UNPINNED=1 bash scripts/setup.sh"
    echo "setup.sh: pip install failed (exit $status)$hint" >&2
    exit 1
fi
.venv/bin/python -c "import benchprof, torch; print(f'benchprof ready (torch {torch.__version__})')"
