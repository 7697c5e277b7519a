#!/usr/bin/env bash
# Wraps `benchprof run`. Usage: ./run.sh [-e] [config.yml]   (options in any order)
#   -e   evaluation and aggregation only (masks and importance must exist)
# Works with bash 3.2 and later (no arrays under `set -u`).
set -eu
usage="usage: ./run.sh [-e] [config.yml]"
eval_only=""
config=""
for arg in "$@"; do
    case $arg in
        -e) eval_only="--eval_only" ;;
        -h | --help) echo "$usage"; exit 0 ;;
        -*) echo "run.sh: unknown option $arg; $usage" >&2; exit 2 ;;
        *)
            if [ -n "$config" ]; then
                echo "run.sh: one config file only (got $config and $arg); $usage" >&2
                exit 2
            fi
            config=$arg ;;
    esac
done
config=${config:-config.yml}
here=$(cd "$(dirname "$0")" && pwd)
benchprof=benchprof
if [ -x "$here/.venv/bin/benchprof" ]; then benchprof="$here/.venv/bin/benchprof"; fi
if [ -n "$eval_only" ]; then
    exec "$benchprof" run "$config" "$eval_only"
fi
exec "$benchprof" run "$config"
