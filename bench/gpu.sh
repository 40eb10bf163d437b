#!/usr/bin/env bash
# The GPU benchmark, prepared for one machine with an NVIDIA GPU; finishes in under 8 minutes:
# bench/gpu_sweep.py's batch sweep 1…64 in fp32 and bf16 (real-time factor, time to first audio,
# device memory) on the full-size random checkpoint. Run from the repository root there:
#   bash bench/gpu.sh
# Its python3 must hold a CUDA torch and transformers. Packages that machine lacks (chattts 0.2.5,
# vocos, vector-quantize-pytorch, pybase16384, WeTextProcessing and their needs) are installed from
# wheels in .whl/ when present (docs/benchmarks.md says how to gather them).
set -euo pipefail
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
exec timeout 470 python3 bench/gpu_sweep.py --device cuda "$@"
