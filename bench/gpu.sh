#!/usr/bin/env bash
# The GPU benchmark, prepared for one machine with an NVIDIA GPU; the whole script ends within
# GPU_SH_SECONDS (default 530 s: under 9 minutes, under the device's 10-minute command):
# 1. ChatTTS: bench/gpu_sweep.py in fp32 on the full-size random checkpoint, with the static KV cache
#    and CUDA graphs (GPU_SH_CHATTTS_VARIANTS="graphs static growing" adds the loops without graphs
#    and with the cache that grows by concatenation, measured 2026-12-04): the batch sweep 1…256
#    (real-time factor, time to first audio, tokens per second, device memory), then 500 jobs
#    through continuous batches of at most 256 and the memory reserved against allocated;
# 2. ChatTTS: bench/gpu_profile.py: kernel launches a step and the GPU's busy fraction, per variant,
#    at 64 and 256 rows;
# 3. ChatTTS: the engine's batch tests (tests/test_batch_engine.py) on the GPU: a row's tokens alone,
#    in any batch and joining a running one; the static cache (with graphs) against the growing one;
#    streamed chunks against the whole decode; stops;
# 4. Kokoro: bench/kokoro_gpu.py in fp32 on its full-size random checkpoint (made in /tmp/kokoro-full),
#    the generator's AdaIN + Snake op by op, then fused by torch.compile (as a GPU worker runs it):
#    the engine's batch path at 1, 8, 32, 64 and 128 rows (audio seconds per second, first audio of a
#    windowed first sentence, device memory), one row's first audio alone, a row batched and on the
#    CPU against the same row alone; the sentences' G2P output travels in .gpu/kokoro_pieces.pkl
#    (`python bench/kokoro_gpu.py --write-pieces .gpu/kokoro_pieces.pkl` here: spaCy and espeak-ng
#    are more than a device call carries);
# 5. VoxCPM2: bench/voxcpm_gpu.py in bf16 (as the real weights run; AudioVAE in fp32) on its
#    full-size random checkpoint (made in /tmp/voxcpm-full, ~9.5 GB, if absent): the batch sweep
#    1, 16 and 64 (aggregate real time, real-time factor a row, first audio with chunks of 0.48 s,
#    a step's time, peak and reserved device memory), then torch.profiler over 16 rows; 170 s at
#    most, starting cold.
# Each step keeps its own timeout (ChatTTS 300, 120, 120 s; Kokoro 110 s; VoxCPM2 170 s) where the
# total allows, else what is left once the later steps keep theirs: with GPU_SH_SECONDS=530 and every
# engine, the ChatTTS sweep gets 150 s (its --budget two thirds of that), the profile and the tests
# 50 s each when the steps before them run to their limits.
# GPU_SH_PARTS="chattts kokoro voxcpm" (the default) chooses the engines.
# Run from the repository root there:
#   bash bench/gpu.sh [gpu_sweep.py options, e.g. --budget 200 --precisions fp32 bf16]
#   GPU_SH_PARTS=voxcpm bash bench/gpu.sh          # VoxCPM2 alone (about 3 minutes)
#   GPU_SH_PARTS=kokoro bash bench/gpu.sh          # Kokoro alone (about 2 minutes)
# Its python3 must hold a CUDA torch and transformers (5.17 or later). Packages that machine lacks
# are installed from wheels in .whl/ when present (docs/benchmarks.md says how to gather them):
# for ChatTTS chattts 0.2.5, vocos, vector-quantize-pytorch, pybase16384 and their needs; for
# VoxCPM2 voxcpm 2.0.3, pydantic, librosa, num2words and theirs ("VoxCPM2 on a GPU"); for Kokoro
# kokoro 0.9.4, loguru, num2words and defusedxml ("Kokoro on a GPU"). No Django,
# Redis or PostgreSQL is needed there.
set -uo pipefail
cd "$(dirname "$0")/.."
deadline=$((SECONDS + ${GPU_SH_SECONDS:-530}))
parts=" ${GPU_SH_PARTS:-chattts kokoro voxcpm} "
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
echo "C compiler (Triton builds its launcher with it): $(command -v cc gcc | head -1)"
python3 -c "import triton; print('triton', triton.__version__)" || true
vox=0 kok=0 sweep=skipped profile=skipped tests=skipped kokoro=skipped voxcpm=skipped
[[ $parts == *" voxcpm "* ]] && vox=170
[[ $parts == *" kokoro "* ]] && kok=110
variants=${GPU_SH_CHATTTS_VARIANTS:-graphs}
later=$((vox + kok))  # what the steps after ChatTTS's keep
if [[ $parts == *" chattts "* ]]; then
  echo "== ChatTTS: the batch sweep per loop variant, then 500 jobs"
  t=$(span 300 $((100 + later)))
  # shellcheck disable=SC2086  # the variants are words
  timeout "$t" python3 bench/gpu_sweep.py --device cuda --precisions fp32 --variants $variants \
    --batches 1 16 64 128 256 --jobs 500 --continuous 256 --budget $((t * 2 / 3)) "$@"
  sweep=$?
  echo "== ChatTTS: launches and GPU busy fraction a step"
  # shellcheck disable=SC2086
  timeout "$(span 120 $((50 + later)))" python3 bench/gpu_profile.py --device cuda --precisions fp32 --variants $variants \
    --rows 64 256 --table
  profile=$?
  echo "== ChatTTS: the engine's batch tests on the GPU"
  python3 -c "from inference.chattts.checkpoint import make_checkpoint; make_checkpoint('tiny', '/tmp/tts-tiny-checkpoint')" >/dev/null 2>&1
  TTS_TEST_DEVICE=cuda TTS_TEST_CHECKPOINT=/tmp/tts-tiny-checkpoint timeout "$(span 120 "$later")" python3 -m pytest -c /dev/null --rootdir . \
    --noconftest -p no:cacheprovider -p no:django -q -W ignore tests/test_batch_engine.py -k "not precisions"
  tests=$?
fi
if ((kok)); then
  echo "== Kokoro: the engine's batch path in fp32 (audio seconds per second, first audio, memory)"
  t=$(span 110 "$vox")
  timeout "$t" python3 bench/kokoro_gpu.py --device cuda --batches 1 8 32 64 128 --runs 2 --budget $((t - 10)) \
    --precisions fp32 --fused off compiled --profile --pieces .gpu/kokoro_pieces.pkl
  kokoro=$?
fi
if ((vox)); then
  echo "== VoxCPM2: the batch sweep in bf16 (first audio, memory)"
  t=$(span 170 0)
  HF_HUB_OFFLINE=1 TQDM_DISABLE=1 timeout "$t" python3 bench/voxcpm_gpu.py --device cuda --dtype bf16 \
    --batches 1 16 64 --patches 32 --runs 1 --budget $((t - 25)) --profile 16
  voxcpm=$?
fi
echo "sweep exit $sweep, profile exit $profile, tests exit $tests, kokoro exit $kokoro, voxcpm exit $voxcpm ($SECONDS s)"
for code in $sweep $profile $tests $kokoro $voxcpm; do [[ $code == skipped || $code == 0 ]] || exit 1; done
exit 0
