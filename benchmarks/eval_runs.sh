#!/usr/bin/env bash
# Runs tfdptext-eval on finished runs, in order, skipping evaluated ones and
# waiting (up to 3 hours) for runs still training. Extra flags after `--`.
#   benchmarks/eval_runs.sh runs/ag_dpnr_none runs/ag_dpnr_eps1 -- --membership
set -u
cd "$(dirname "$0")/.."
dirs=(); extra=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; extra=("$@"); break; fi
  dirs+=("$1"); shift
done
mkdir -p runs/logs
for dir in "${dirs[@]}"; do
  name=$(basename "$dir")
  if [ -f "$dir/eval/eval.json" ]; then echo "skip $name (done)"; continue; fi
  for _ in $(seq 540); do [ -f "$dir/metrics.json" ] && break; sleep 20; done
  echo "eval $name $(date -u +%H:%M:%S)"
  .venv/bin/tfdptext-eval --model_dir="$dir" "${extra[@]}" \
    > "runs/logs/eval_$name.log" 2>&1 || echo "FAILED $name (see runs/logs/eval_$name.log)"
done
