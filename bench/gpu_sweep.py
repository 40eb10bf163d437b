"""Batch sweep on a GPU (or any device): real-time factor and time to first audio of
`generate_batch` at batch sizes 1…64, per precision and per loop variant (`--variants`: the static
KV cache with CUDA graphs, without them, and the cache that grows by concatenation), on the
full-size random checkpoint with fixed-length rows (every row runs to its budget: equal work per
row; random weights make noise). Then `--jobs` jobs of varied lengths through continuous batches
(rows joining and leaving), and the device memory reserved against allocated after them. Needs no
Django. Stops a sweep early if the time budget runs out. Run by bench/gpu.sh.

    python3 bench/gpu_sweep.py [--device cuda] [--batches 1 2 4 8 16 32 64] [--budget 300]
        [--precisions fp32 bf16] [--variants graphs static growing] [--jobs 500] [--continuous 64]
        [--size full]
    python3 bench/gpu_sweep.py --device cpu --size tiny --batches 1 4 --jobs 20   # the script's own check
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dataclasses import replace  # noqa: E402

from inference.batch import BatchRow  # noqa: E402
from inference.chattts.checkpoint import make_checkpoint  # noqa: E402
from inference.chattts.engine import ChatTTSEngine  # noqa: E402
from inference.chattts.params import ChatTTSParams, token_budget  # noqa: E402
from inference.chattts.spec import SPEC as CHATTTS  # noqa: E402
from inference.device import device_stats  # noqa: E402
from inference.spec import SAMPLE_RATE  # noqa: E402

TEXT = "Hello there, my old friend."  # 215 tokens at fixed length: 4.6 s of audio
VARIANTS = {  # the loop's KV cache and, on CUDA, captured steps (GPTParts)
    "graphs": {"static_cache": True, "cuda_graphs": True},
    "static": {"static_cache": True, "cuda_graphs": False},
    "growing": {"static_cache": False, "cuda_graphs": False},
}


class Clock:
    def __init__(self):
        self.started = time.perf_counter()
        self.first: float | None = None
        self.samples = 0

    def audio(self, key, samples):
        if self.first is None:
            self.first = time.perf_counter() - self.started
        self.samples += len(samples)

    def done(self, key, tokens, words=()):
        pass

    def stop_requested(self, key):
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--budget", type=float, default=300, help="seconds for the whole sweep")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--jobs", type=int, default=0, help="jobs through continuous batches, then memory")
    parser.add_argument("--continuous", type=int, default=64, help="the most rows at once in --jobs' batches")
    parser.add_argument("--size", default="full", choices=["tiny", "full"])
    parser.add_argument("--checkpoint", default="", help="default: /tmp/tts-<size>-checkpoint")
    args = parser.parse_args()
    args.checkpoint = args.checkpoint or f"/tmp/tts-{args.size}-checkpoint"
    import torch
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}", flush=True)
    began = time.monotonic()
    if not (Path(args.checkpoint) / "checkpoint.json").exists():
        make_checkpoint(args.size, args.checkpoint)
    (segment,) = CHATTTS.prepare(TEXT).segments
    budget = token_budget(segment)
    print(f"device {args.device}; {budget} tokens per row ({budget * 512 / SAMPLE_RATE:.2f} s of audio)", flush=True)
    per_sweep = args.budget / (len(args.precisions) * len(args.variants))
    for precision in args.precisions:
        try:
            engine = ChatTTSEngine.load(args.checkpoint, device=args.device, fixed_length=True, precision=precision)
            engine.warm_up()
            parts = engine._gpt_parts()
            kv = engine.kv_row_bytes()
            free = torch.cuda.mem_get_info(engine.device)[0] if engine.device.type == "cuda" else 0
            print(f"{precision}: {engine.model_version}; KV cache {kv / 2**20:.1f} MiB a row of 2048 columns")
            if free:
                print(
                    f"{precision}: {free / 2**30:.1f} GiB free: {free // (2 * kv)} rows' caches fit twice over; "
                    f"default batch {engine.default_max_batch()}"
                )
            for variant in args.variants:
                engine._parts = replace(parts, **VARIANTS[variant])
                name = f"{precision} {variant}" + (" (no graphs on a CPU)" if variant == "graphs" and not free else "")
                sweep(args, engine, name, segment, budget, began, per_sweep)
                if args.jobs:
                    long_run(engine, name, args.jobs, args.continuous)
            del engine
        except Exception:  # one precision failing still leaves the other's figures
            traceback.print_exc()
            print(f"{precision}: failed", flush=True)


def long_run(engine, name: str, jobs: int, at_once: int) -> None:
    """`jobs` rows of 24…240 tokens through continuous batches of at most `at_once` (rows join as others
    leave), then the device memory reserved against allocated (fragmentation shows as reserved ≫
    allocated)."""
    import torch

    rng = random.Random(7)
    rows = [
        BatchRow(f"j{i}", TEXT, ChatTTSParams(voice_seed=1 + i % 8, seed=i), rng.randint(24, 240)) for i in range(jobs)
    ]
    first, waiting = rows[:at_once], rows[at_once:]

    def more(live: int) -> list[BatchRow]:
        joining = waiting[: at_once - live]
        del waiting[: len(joining)]
        return joining

    started = time.perf_counter()
    clock = Clock()
    engine.generate_batch(first, clock, more=more)
    wall = time.perf_counter() - started
    rate = clock.samples / SAMPLE_RATE / wall
    line = f"{name}: {jobs} jobs, at most {at_once} at once, in {wall:.1f} s, {rate:.1f}x real time"
    if engine.device.type == "cuda":
        reserved, allocated = torch.cuda.memory_reserved(engine.device), torch.cuda.memory_allocated(engine.device)
        peak = torch.cuda.max_memory_allocated(engine.device)
        line += (
            f"; reserved {reserved / 2**30:.2f} GiB, allocated {allocated / 2**30:.2f} GiB, peak allocated "
            f"{peak / 2**30:.2f} GiB: reserved/peak ×{reserved / max(peak, 1):.2f}"
        )
    print(line, flush=True)


def sweep(args, engine, name: str, segment: str, budget: int, began: float, per_sweep: float) -> None:
    import torch

    started = time.monotonic()
    warm_up = BatchRow("w", segment, ChatTTSParams(voice_seed=1, seed=1), 8)
    engine.generate_batch([warm_up], Clock())  # the variant's first run (a capture, on CUDA)
    for n in args.batches:
        rows = [BatchRow(str(i), segment, ChatTTSParams(voice_seed=1 + i % 8, seed=100 + i), budget) for i in range(n)]
        if engine.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(engine.device)
        clock = Clock()
        engine.generate_batch(rows, clock)
        wall = time.perf_counter() - clock.started
        audio = clock.samples / SAMPLE_RATE
        stats = device_stats(engine.device)
        peak = torch.cuda.max_memory_allocated(engine.device) if engine.device.type == "cuda" else 0
        print(
            f"{name} batch {n:>2}: {audio / wall:7.2f}x real time (aggregate), {wall:6.2f} s, "
            f"first audio {clock.first or 0:.2f} s, {budget * n / wall:7.0f} tokens/s, device memory "
            f"reserved {float(stats.get('memory_bytes', 0)) / 2**30:.2f} GiB, peak allocated {peak / 2**30:.2f} GiB",
            flush=True,
        )
        if time.monotonic() - started > per_sweep or time.monotonic() - began > args.budget:
            print(f"{name}: time budget spent, sweep stopped", flush=True)
            break
    print(f"{name}: worker metrics' device_stats: {device_stats(engine.device)}", flush=True)


if __name__ == "__main__":
    main()
