#!/usr/bin/env bash
# Wraps `benchprof run`. Usage: ./run.sh [-e] [-f] [CONFIG]   (options in any order; CONFIG: default config.yml)
#   -e   evaluation and aggregation only (masks and importance must exist); evaluations still current are skipped
#   -f   redo the work of the stages it runs even where it is current (`benchprof run --force`)
# It says the command it runs, with the config, on stderr first.
# Works with bash 3.2 and later (no arrays under `set -u`).
set -eu
usage="usage: ./run.sh [-e] [-f] [CONFIG]   (CONFIG: default config.yml, the paper's Llama-3.1-8B setup)"
eval_only=""
force=""
config=""
for arg in "$@"; do
    case $arg in
        -e) eval_only="--eval_only" ;;
        -f) force="--force" ;;
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
echo "run.sh: benchprof run $config${eval_only:+ $eval_only}${force:+ $force}" >&2
# $eval_only and $force unquoted: each is one word or none
exec "$benchprof" run "$config" $eval_only $force
