"""Where a generation step's time goes, per precision and loop variant (the static KV cache with
CUDA graphs, without them, the cache that grows by concatenation): torch.profiler over rows of the
full-size random checkpoint (48 fixed-length tokens each), then per decode step the kernel
launches (CUDA runtime launch calls; a replayed graph is one), the time a step takes, the GPU's
busy fraction (kernel time over wall time) and the top operators by CPU and by device time.
Made first to find why bf16 ran ~5x slower than fp32 per step on an H200 (docs/benchmarks.md).

    python3 bench/gpu_profile.py [--device cuda] [--precisions fp32 bf16] [--variants graphs static growing]
        [--rows 1 64] [--tokens 48] [--size full] [--table]
    python3 bench/gpu_profile.py --device cpu --size tiny --precisions fp32   # the script's own check
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import LAUNCHES  # noqa: E402

from inference.batch import BatchRow  # noqa: E402
from inference.chattts.checkpoint import make_checkpoint  # noqa: E402
from inference.chattts.engine import ChatTTSEngine  # noqa: E402
from inference.chattts.params import ChatTTSParams  # noqa: E402
from inference.chattts.spec import SPEC as CHATTTS  # noqa: E402

TEXT = "Hello there, my old friend."
VARIANTS = {
    "graphs": {"static_cache": True, "cuda_graphs": True},
    "static": {"static_cache": True, "cuda_graphs": False},
    "growing": {"static_cache": False, "cuda_graphs": False},
}


class Sink:
    def audio(self, key, samples):
        pass

    def done(self, key, tokens, words=()):
        pass

    def stop_requested(self, key):
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--rows", type=int, nargs="+", default=[1], help="batch sizes, one profile each")
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--size", default="full", choices=["tiny", "full"])
    parser.add_argument("--checkpoint", default="", help="default: /tmp/tts-<size>-checkpoint")
    parser.add_argument("--table", action="store_true", help="the top operators too")
    args = parser.parse_args()
    checkpoint = args.checkpoint or f"/tmp/tts-{args.size}-checkpoint"
    if not (Path(checkpoint) / "checkpoint.json").exists():
        make_checkpoint(args.size, checkpoint)
    (segment,) = CHATTTS.prepare(TEXT).segments
    for precision in args.precisions:
        engine = ChatTTSEngine.load(checkpoint, device=args.device, fixed_length=True, precision=precision)
        engine.warm_up()
        parts = engine._gpt_parts()
        print(f"== {precision}: llama dtype {parts.dtype}, attention {engine.chat.gpt.gpt.config._attn_implementation}")
        for variant in args.variants:
            engine._parts = replace(parts, **VARIANTS[variant])
            name = f"{precision} {variant}" + (
                " (no graphs on a CPU)" if variant == "graphs" and args.device == "cpu" else ""
            )
            for n in args.rows:
                params = [ChatTTSParams(voice_seed=1 + i % 8, seed=100 + i) for i in range(n)]
                rows = [BatchRow(f"r{i}", segment, p, args.tokens) for i, p in enumerate(params)]
                profile_variant(engine, name, rows, args)
        del engine


def profile_variant(engine, name: str, rows: list[BatchRow], args) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = engine.device.type == "cuda"
    engine.generate_batch(rows, Sink())  # captures, allocations, caches
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    sync()
    started = time.perf_counter()
    engine.generate_batch(rows, Sink())
    sync()
    wall = time.perf_counter() - started
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        engine.generate_batch(rows, Sink())
        sync()
    steps = args.tokens
    events = prof.key_averages()
    launches = sum(e.count for e in events if e.key in LAUNCHES)
    line = f"{name}: {len(rows)} rows × {steps} tokens in {wall:.2f} s, {1000 * wall / steps:.1f} ms a step"
    if cuda:
        kernels = sum(e.self_device_time_total for e in events if e.device_type.name == "CUDA") / 1e6
        line += f", {launches / steps:.0f} launches a step, GPU busy {kernels / wall:.0%} of the wall time"
    print(line, flush=True)
    if args.table:
        for key in ("self_cpu_time_total", "self_cuda_time_total"):
            try:
                print(events.table(sort_by=key, row_limit=18, max_name_column_width=60), flush=True)
            except Exception as error:  # sort keys differ between torch versions
                print(f"   (no table by {key}: {error})")


if __name__ == "__main__":
    main()
