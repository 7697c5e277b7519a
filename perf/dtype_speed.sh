#!/usr/bin/env bash
# bfloat16 against float32 evaluation on these CPUs (docs/research/performance.md section 5): per model, perf/scoring.py's
# scorer against plain forward passes in each dtype, then `benchprof evaluate --original_only` on ARC-Easy at 500
# documents, twice per dtype, each into a fresh output folder: the whole command's seconds and the job's own
# (its result's wall_seconds). Run it alone on the machine. Needs scripts/fetch_real.py (and --model qwen2.5-0.5b)
# and the abilities' data: benchprof data configs/smollm2-power.yml.
#   bash perf/dtype_speed.sh [smollm2 qwen]
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_EVALUATE_OFFLINE=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for name in ${@:-smollm2 qwen}; do
  model=real/SmolLM2-135M-Instruct; [ "$name" = qwen ] && model=real/Qwen2.5-Coder-0.5B-Instruct
  for d in float32 bfloat16; do
    echo "== perf/scoring.py $name $d (load: $(cut -d' ' -f1 /proc/loadavg))"
    .venv/bin/python perf/scoring.py "$model" --benchmarks arc_easy:0 --limit 500 --skip-authors --skip-hflm \
      --threads 2 --dtype "$d" 2>/dev/null | tail -3
    cat > "$work/$name-$d.yml" <<YAML
settings: {cuda_visible_devices: "", eval_batch_size: 16, k_values: [0.0033], output_dir: $work/out, threads: 2}
models: [{name: $PWD/$model, tag: $name-$d}]
datasets: [{name: Analogical_Reasoning}, {name: Commonsense_Causal}]
evals: {benchmarks: [{name: arc_easy, limit: 500}], backend: hf, device: cpu, dtype: $d,
      dataset_paths: {arc_easy: $PWD/real/benchmarks/arc_easy}}
data: {dir: $PWD/data/smollm2-power, train_size: 500, test_size: 300, seed: 1234, difficulty: easy, split_by: problem, transfer_size: 200}
YAML
  done
  for rep in 1 2; do
    for d in float32 bfloat16; do
      rm -rf "$work/out"
      start=$(date +%s.%N)
      .venv/bin/benchprof evaluate "$work/$name-$d.yml" --original_only > /dev/null 2>&1
      end=$(date +%s.%N)
      job=$(.venv/bin/python -c "import json,sys; print(json.load(open(sys.argv[1]))['wall_seconds'])" \
        "$work/out/$name-$d/original/eval/arc_easy.json")
      echo "evaluate $name $d, run $rep: whole command $(.venv/bin/python -c "print(round($end - $start, 1))") s, job $job s"
    done
  done
done
