#!/usr/bin/env bash
# Create .venv and install benchprof with its test extra. Safe to rerun.
# torch is installed first, pinned to 2.13.0, unless the venv already has a torch (a CUDA build you
# installed on a GPU node is kept). Which build: a 2.13.0 wheel pip finds without an index (e.g. in a
# find-links folder) first; else, with no NVIDIA driver on the machine, the CPU build from PyTorch's
# CPU wheel index (TORCH_INDEX_URL overrides it); else PyPI's default (CUDA) build.
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
    .venv/bin/pip install --quiet --disable-pip-version-check --no-compile "$@" 2>&1 | grep -v "is ignored" \
        || status=${PIPESTATUS[0]}
    [ "$status" = 0 ] || { echo "setup.sh: installing $what failed (exit $status)" >&2; exit 1; }
}

# has_nvidia_driver: an NVIDIA kernel driver is loaded or its tool is on PATH
has_nvidia_driver() { [ -e /proc/driver/nvidia/version ] || command -v nvidia-smi >/dev/null 2>&1; }

install_torch() {
    local pin="torch==2.13.0"
    if .venv/bin/pip install --dry-run --no-index --no-deps --quiet "$pin" >/dev/null 2>&1; then
        pip_install "$pin (a local wheel)" "$pin"  # its dependencies from the usual indexes
    elif has_nvidia_driver; then
        pip_install "$pin (PyPI's CUDA build)" "$pin"
    else
        local index=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}
        pip_install "$pin (CPU build from $index)" --index-url "$index" "$pin"
    fi
}

[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -c "import torch" 2>/dev/null || install_torch
# Bytecode: pip compiles one file at a time (93 s here); compileall writes the same .pyc files on every
# usable core. torch's own folders, which the next install leaves alone, compile on one core while pip
# resolves and unpacks the rest; then the rest. A file a package ships that does not compile leaves no
# .pyc (pip skips those too), so compileall's exit status is not setup's.
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
.venv/bin/python -m compileall -qq "$site"/torch "$site"/functorch "$site"/torchgen >/dev/null 2>&1 &
torch_bytecode=$!
trap 'kill "$torch_bytecode" 2>/dev/null || true' EXIT  # a failed install stops it too
if [ "${UNPINNED:-0}" = 1 ]; then
    pip_install benchprof -e ".[dev]"
else
    pip_install "benchprof within constraints.txt (tested on Python 3.11; try UNPINNED=1 bash scripts/setup.sh)" \
        -c constraints.txt -e ".[dev]"
fi
wait "$torch_bytecode" || true
.venv/bin/python -m compileall -qq -j "$(nproc 2>/dev/null || echo 1)" .venv/lib >/dev/null 2>&1 || true
.venv/bin/python -c "import benchprof, torch; print(f'benchprof ready (torch {torch.__version__})')"
