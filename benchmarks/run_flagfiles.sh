#!/usr/bin/env bash
# Runs tfdptext-train once per flag file, in order, logging each run.
#   benchmarks/run_flagfiles.sh train/flags/ag_dpnr_none.flags train/flags/ag_dpnr_eps*.flags
# A finished run (metrics.json present) is skipped; an interrupted one resumes.
set -u
cd "$(dirname "$0")/.."
mkdir -p runs/logs
for flagfile in "$@"; do
  name=$(basename "$flagfile" .flags)
  out=$(sed -n 's/^--output_dir=//p' "$flagfile")
  if [ -n "$out" ] && [ -f "$out/metrics.json" ]; then
    echo "skip $name (done)"; continue
  fi
  echo "run $name $(date -u +%H:%M:%S)"
  .venv/bin/tfdptext-train --flagfile="$flagfile" > "runs/logs/$name.log" 2>&1 \
    || echo "FAILED $name (see runs/logs/$name.log)"
done
