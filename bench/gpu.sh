#!/usr/bin/env bash
# The GPU benchmark, prepared for one machine with an NVIDIA GPU; finishes in under 8 minutes:
# 1. bench/gpu_sweep.py's batch sweep 1…64 in fp32 and bf16 (real-time factor, time to first audio,
#    tokens per second, device memory) on the full-size random checkpoint;
# 2. the engine's batch tests (tests/test_batch_engine.py) on the GPU: a row's tokens alone, in any
#    batch and joining a running one; streamed chunks against the whole decode; stops.
# Run from the repository root there:
#   bash bench/gpu.sh [gpu_sweep.py options, e.g. --budget 200]
# Its python3 must hold a CUDA torch and transformers (5.17 or later). Packages that machine lacks
# (chattts 0.2.5, vocos, vector-quantize-pytorch, pybase16384 and their needs) are installed from
# wheels in .whl/ when present (docs/benchmarks.md says how to gather them). No Django, Redis or
# PostgreSQL is needed there.
set -uo pipefail
cd "$(dirname "$0")/.."
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
timeout 360 python3 bench/gpu_sweep.py --device cuda "$@"
sweep=$?
echo "== the engine's batch tests on the GPU"
python3 -c "from inference.checkpoint import make_checkpoint; make_checkpoint('tiny', '/tmp/tts-tiny-checkpoint')" >/dev/null 2>&1
TTS_TEST_DEVICE=cuda TTS_TEST_CHECKPOINT=/tmp/tts-tiny-checkpoint timeout 90 python3 -m pytest -c /dev/null --rootdir . \
  --noconftest -p no:cacheprovider -p no:django -q -W ignore tests/test_batch_engine.py -k "not precisions"
tests=$?
echo "sweep exit $sweep, tests exit $tests"
exit $(( sweep || tests ))
