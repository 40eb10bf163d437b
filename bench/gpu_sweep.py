"""Batch sweep on a GPU (or any device): real-time factor and time to first audio of
`generate_batch` at batch sizes 1…64, fp32 and bf16, on the full-size random checkpoint with
fixed-length rows (every row runs to its budget: equal work per row; random weights make noise).
Needs no Django. Stops a precision's sweep early if the time budget runs out. Run by bench/gpu.sh.

    python3 bench/gpu_sweep.py [--device cuda] [--batches 1 2 4 8 16 32 64] [--budget 300]
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from inference.batch import BatchRow  # noqa: E402
from inference.chattts.checkpoint import make_checkpoint  # noqa: E402
from inference.chattts.engine import ChatTTSEngine  # noqa: E402
from inference.chattts.params import ChatTTSParams, token_budget  # noqa: E402
from inference.chattts.spec import SPEC as CHATTTS  # noqa: E402
from inference.device import device_stats  # noqa: E402
from inference.spec import SAMPLE_RATE  # noqa: E402

TEXT = "Hello there, my old friend."  # 215 tokens at fixed length: 4.6 s of audio


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
    parser.add_argument("--checkpoint", default="/tmp/tts-full-checkpoint")
    args = parser.parse_args()
    import torch
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}", flush=True)
    began = time.monotonic()
    if not (Path(args.checkpoint) / "checkpoint.json").exists():
        make_checkpoint("full", args.checkpoint)
    (segment,) = CHATTTS.prepare(TEXT).segments
    budget = token_budget(segment)
    print(f"device {args.device}; {budget} tokens per row ({budget * 512 / SAMPLE_RATE:.2f} s of audio)", flush=True)
    per_precision = args.budget / len(args.precisions)
    for precision in args.precisions:
        try:
            sweep(args, precision, segment, budget, began, per_precision)
        except Exception:  # one precision failing still leaves the other's figures
            traceback.print_exc()
            print(f"{precision}: failed", flush=True)


def sweep(args, precision: str, segment: str, budget: int, began: float, per_precision: float) -> None:
    import torch

    started = time.monotonic()
    engine = ChatTTSEngine.load(args.checkpoint, device=args.device, fixed_length=True, precision=precision)
    engine.warm_up()
    print(
        f"{precision}: loaded and warmed up in {time.monotonic() - started:.1f} s ({engine.model_version})", flush=True
    )
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
            f"{precision} batch {n:>2}: {audio / wall:7.2f}x real time (aggregate), {wall:6.2f} s, "
            f"first audio {clock.first or 0:.2f} s, {budget * n / wall:7.0f} tokens/s, device memory "
            f"reserved {float(stats.get('memory_bytes', 0)) / 2**30:.2f} GiB, peak allocated {peak / 2**30:.2f} GiB",
            flush=True,
        )
        if time.monotonic() - started > per_precision or time.monotonic() - began > args.budget:
            print(f"{precision}: time budget spent, sweep stopped", flush=True)
            break
    print(f"{precision}: worker metrics' device_stats: {device_stats(engine.device)}", flush=True)


if __name__ == "__main__":
    main()
