#!/usr/bin/env bash
# The GPU benchmark, prepared for one machine with an NVIDIA GPU; finishes in under 9 minutes:
# 1. bench/gpu_sweep.py in fp32 on the full-size random checkpoint, for each loop variant (the
#    static KV cache with CUDA graphs, without them, the cache that grows by concatenation): the
#    batch sweep 1…64 (real-time factor, time to first audio, tokens per second, device memory),
#    then 500 jobs through continuous batches of 64 and the memory reserved against allocated;
# 2. bench/gpu_profile.py: kernel launches a step and the GPU's busy fraction, per variant, at 1
#    and 64 rows;
# 3. the engine's batch tests (tests/test_batch_engine.py) on the GPU: a row's tokens alone, in any
#    batch and joining a running one; the static cache (with graphs) against the growing one;
#    streamed chunks against the whole decode; stops.
# Run from the repository root there:
#   bash bench/gpu.sh [gpu_sweep.py options, e.g. --budget 200 --precisions fp32 bf16]
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
timeout 300 python3 bench/gpu_sweep.py --device cuda --precisions fp32 --jobs 500 --budget 200 "$@"
sweep=$?
echo "== launches and GPU busy fraction a step"
timeout 120 python3 bench/gpu_profile.py --device cuda --precisions fp32 --rows 1 64
profile=$?
echo "== the engine's batch tests on the GPU"
python3 -c "from inference.chattts.checkpoint import make_checkpoint; make_checkpoint('tiny', '/tmp/tts-tiny-checkpoint')" >/dev/null 2>&1
TTS_TEST_DEVICE=cuda TTS_TEST_CHECKPOINT=/tmp/tts-tiny-checkpoint timeout 120 python3 -m pytest -c /dev/null --rootdir . \
  --noconftest -p no:cacheprovider -p no:django -q -W ignore tests/test_batch_engine.py -k "not precisions"
tests=$?
echo "sweep exit $sweep, profile exit $profile, tests exit $tests"
exit $(( sweep || profile || tests ))
