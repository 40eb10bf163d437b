"""Where a generation step's time goes, per precision: torch.profiler over one row of the
full-size random checkpoint (48 fixed-length tokens), the top operators by CPU and by device time.
Made to find why bf16 ran ~5x slower than fp32 per step on an H200 (docs/benchmarks.md).

    python3 bench/gpu_profile.py [--device cuda] [--precisions fp32 bf16]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from inference.batch import BatchRow  # noqa: E402
from inference.chattts.checkpoint import make_checkpoint  # noqa: E402
from inference.chattts.engine import ChatTTSEngine  # noqa: E402
from inference.chattts.params import ChatTTSParams  # noqa: E402
from inference.chattts.spec import SPEC as CHATTTS  # noqa: E402

TEXT = "Hello there, my old friend."


class Sink:
    def audio(self, key, samples):
        pass

    def done(self, key, tokens, words=()):
        pass

    def stop_requested(self, key):
        return False


def main() -> None:
    from torch.profiler import ProfilerActivity, profile

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--checkpoint", default="/tmp/tts-full-checkpoint")
    args = parser.parse_args()
    if not (Path(args.checkpoint) / "checkpoint.json").exists():
        make_checkpoint("full", args.checkpoint)
    (segment,) = CHATTTS.prepare(TEXT).segments
    rows = [BatchRow("a", segment, ChatTTSParams(voice_seed=1, seed=100), args.tokens)]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    for precision in args.precisions:
        engine = ChatTTSEngine.load(args.checkpoint, device=args.device, fixed_length=True, precision=precision)
        engine.warm_up()
        engine.generate_batch(rows, Sink())
        started = time.perf_counter()
        engine.generate_batch(rows, Sink())
        print(f"== {precision}: {args.tokens} tokens in {time.perf_counter() - started:.2f} s", flush=True)
        attention = engine.chat.gpt.gpt.config._attn_implementation
        print("   llama dtype:", engine._gpt_parts().dtype, "attention:", attention, flush=True)
        with profile(activities=activities) as prof:
            engine.generate_batch(rows, Sink())
        table = prof.key_averages()
        for key in ("self_cpu_time_total", "self_cuda_time_total"):
            try:
                print(table.table(sort_by=key, row_limit=18, max_name_column_width=60), flush=True)
            except Exception as error:  # sort keys differ between torch versions
                print(f"   (no table by {key}: {error})")
        engine.chat.gpt.gpt.config._attn_implementation = "eager"  # the same run without SDPA
        engine.generate_batch(rows, Sink())
        started = time.perf_counter()
        engine.generate_batch(rows, Sink())
        print(f"== {precision}, eager attention: {args.tokens} tokens in {time.perf_counter() - started:.2f} s")
        del engine


if __name__ == "__main__":
    main()
