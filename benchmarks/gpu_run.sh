#!/usr/bin/env bash
# The whole device command of the GPU package (issue 37). `make
# gpu-package` copies this file to .gpu/run.sh beside the wheels, the
# float16 MiniLM encoder and the pre-tokenized data.
#
#   OUT=/some/dir bash .gpu/run.sh [--dry_run] [--budget_s=480]
#
# Uses ${PYTHON:-python3}; installs the carried wheels (keras, keras-hub and
# what they need, --no-deps) into /tmp/site when keras_hub is missing; runs
# benchmarks/gpu_cells.py under KERAS_BACKEND (default jax), which rewrites
# $OUT/gpu_cells.json after every cell. --dry_run: the same path on the
# CPU (JAX_PLATFORMS=cpu), 2 steps a cell.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The checkout: the package's parent (.gpu/ sits in it), or $TFDPTEXT_REPO.
REPO="${TFDPTEXT_REPO:-$(cd "$HERE/.." && pwd)}"
PYTHON="${PYTHON:-python3}"
: "${OUT:?set OUT to the results directory}"
mkdir -p "$OUT"
export KERAS_BACKEND="${KERAS_BACKEND:-jax}"
for arg in "$@"; do
  if [ "$arg" = "--dry_run" ]; then export JAX_PLATFORMS=cpu; fi
done
# Found, not imported (an import of keras_hub costs about 6 CPU-s).
if ! "$PYTHON" -c "import importlib.util as u, sys
sys.exit(u.find_spec('keras_hub') is None or u.find_spec('keras') is None)" \
    >/dev/null 2>&1; then
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target /tmp/site "$HERE"/wheels/*.whl
  export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
"$PYTHON" -c "import sys; print(sys.version.split()[0])" >&2
exec "$PYTHON" "$REPO/benchmarks/gpu_cells.py" --package "$HERE" \
  --out "$OUT" "$@"
