#!/usr/bin/env bash
# Wraps `benchprof run`. Usage: ./run.sh [-e] [config.yml]
#   -e   evaluation and aggregation only (masks and importance must exist)
set -euo pipefail
EVAL_ONLY=()
while getopts "e" opt; do
    case $opt in
        e) EVAL_ONLY=(--eval_only) ;;
        *) echo "usage: ./run.sh [-e] [config.yml]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
CONFIG=${1:-config.yml}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCHPROF=benchprof
[ -x "$HERE/.venv/bin/benchprof" ] && BENCHPROF="$HERE/.venv/bin/benchprof"
exec "$BENCHPROF" run "$CONFIG" "${EVAL_ONLY[@]}"
