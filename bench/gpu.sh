#!/usr/bin/env bash
# The GPU benchmark, prepared for one machine with an NVIDIA GPU; the whole script ends within
# GPU_SH_SECONDS (default 540 s: 9 minutes, under the device's 10-minute command):
# 1. ChatTTS: bench/gpu_sweep.py in fp32 on the full-size random checkpoint, for each loop variant
#    (the static KV cache with CUDA graphs, without them, the cache that grows by concatenation):
#    the batch sweep 1…64 (real-time factor, time to first audio, tokens per second, device memory),
#    then 500 jobs through continuous batches of 64 and the memory reserved against allocated;
# 2. ChatTTS: bench/gpu_profile.py: kernel launches a step and the GPU's busy fraction, per variant,
#    at 1 and 64 rows;
# 3. ChatTTS: the engine's batch tests (tests/test_batch_engine.py) on the GPU: a row's tokens alone,
#    in any batch and joining a running one; the static cache (with graphs) against the growing one;
#    streamed chunks against the whole decode; stops;
# 4. VoxCPM2: bench/voxcpm_gpu.py in bf16 (as the real weights run; AudioVAE in fp32) on its
#    full-size random checkpoint (made in /tmp/voxcpm-full, ~9.5 GB, if absent): the batch sweep
#    1, 4, 16, 32, 64 (aggregate real time, real-time factor a row, first audio with chunks of 0.48 s,
#    a step's time, peak and reserved device memory); 240 s at most, starting cold.
# Steps 1-3 keep their own timeouts (300, 120, 120 s; the sweep's --budget two thirds of its own)
# where the total allows, else what is left once the later steps keep theirs (60, 60 and VoxCPM2's
# 240 s): with both engines 180 s (--budget 120), then 60 and 60 s when each runs to its limit.
# GPU_SH_PARTS="chattts voxcpm" (the default) chooses the engines.
# Run from the repository root there:
#   bash bench/gpu.sh [gpu_sweep.py options, e.g. --budget 200 --precisions fp32 bf16]
#   GPU_SH_PARTS=voxcpm bash bench/gpu.sh          # VoxCPM2 alone (about 4 minutes)
# Its python3 must hold a CUDA torch and transformers (5.17 or later). Packages that machine lacks
# are installed from wheels in .whl/ when present (docs/benchmarks.md says how to gather them):
# for ChatTTS chattts 0.2.5, vocos, vector-quantize-pytorch, pybase16384 and their needs; for
# VoxCPM2 voxcpm 2.0.3, pydantic, librosa, num2words and theirs ("VoxCPM2 on a GPU"). No Django,
# Redis or PostgreSQL is needed there.
set -uo pipefail
cd "$(dirname "$0")/.."
deadline=$((SECONDS + ${GPU_SH_SECONDS:-540}))
parts=" ${GPU_SH_PARTS:-chattts voxcpm} "
# A step's timeout: what it asks for ($1), or less, so that the steps after it keep $2 seconds.
span() {
  local left=$((deadline - SECONDS - $2))
  ((left > $1)) && left=$1
  ((left < 30)) && left=30
  echo "$left"
}
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
vox=0 sweep=skipped profile=skipped tests=skipped voxcpm=skipped
[[ $parts == *" voxcpm "* ]] && vox=240
if [[ $parts == *" chattts "* ]]; then
  echo "== ChatTTS: the batch sweep per loop variant, then 500 jobs"
  t=$(span 300 $((120 + vox)))
  timeout "$t" python3 bench/gpu_sweep.py --device cuda --precisions fp32 --jobs 500 --budget $((t * 2 / 3)) "$@"
  sweep=$?
  echo "== ChatTTS: launches and GPU busy fraction a step"
  timeout "$(span 120 $((60 + vox)))" python3 bench/gpu_profile.py --device cuda --precisions fp32 --rows 1 64
  profile=$?
  echo "== ChatTTS: the engine's batch tests on the GPU"
  python3 -c "from inference.chattts.checkpoint import make_checkpoint; make_checkpoint('tiny', '/tmp/tts-tiny-checkpoint')" >/dev/null 2>&1
  TTS_TEST_DEVICE=cuda TTS_TEST_CHECKPOINT=/tmp/tts-tiny-checkpoint timeout "$(span 120 "$vox")" python3 -m pytest -c /dev/null --rootdir . \
    --noconftest -p no:cacheprovider -p no:django -q -W ignore tests/test_batch_engine.py -k "not precisions"
  tests=$?
fi
if ((vox)); then
  echo "== VoxCPM2: the batch sweep in bf16 (first audio, memory)"
  HF_HUB_OFFLINE=1 TQDM_DISABLE=1 timeout "$(span 240 0)" python3 bench/voxcpm_gpu.py --device cuda --dtype bf16 \
    --batches 1 4 16 32 64 --patches 32 --runs 2 --budget 210
  voxcpm=$?
fi
echo "sweep exit $sweep, profile exit $profile, tests exit $tests, voxcpm exit $voxcpm"
for code in $sweep $profile $tests $voxcpm; do [[ $code == skipped || $code == 0 ]] || exit 1; done
exit 0
