"""VoxCPM2 on a GPU (or any device), without Django: a batch sweep of the engine's rows on the
full-size random checkpoint (the official shapes, so the real compute; noise, not speech). Run by
bench/gpu.sh.

Makes the checkpoint if it is absent (`inference.voxcpm.checkpoint.make_checkpoint`, float32: ~9.5 GB
and ~75 s on a 2-core CPU), loads it with `VoxCPMEngine.load(fixed_length=True)` (every row runs to
its budget: equal work per row), and with `--dtype bf16` casts the model to bfloat16 as the real
weights run (the package's own loader: everything but `audio_vae`, which stays float32). Then, at each
batch size (rows of different designs and seeds, `BatchRow(key, text, VoxCPMParams(design, seed=i),
patches)`), one `run_rows` with chunks of 3 patches (0.48 s, the first audio a client hears):

- aggregate audio seconds per wall second, and the real-time factor of a row (wall / its audio);
- time to first audio: the first `Audio` event of the batch (and the last row's first);
- the time of a step after the first chunk (every live row's next patch: diffusion, VAE, LMs);
- device memory: peak allocated and reserved during the batch (peak stats reset and the caching
  allocator emptied before each), and the rows' KV slots.

The sweep stops before a batch size that would not fit in what is left of `--budget` (counted from
the script's start, the checkpoint and the load included; the first batch always runs), and prints a
table of the last run at each size.

    python3 bench/voxcpm_gpu.py --device cuda --dtype bf16 [--batches 1 4 16 32] [--patches 32]
        [--runs 2] [--budget 200] [--size full] [--checkpoint /tmp/voxcpm-full]
    python3 bench/voxcpm_gpu.py --device cpu --size tiny --batches 1 4 --patches 4   # the script's own check
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEXT = "The morning train was late again, so we walked along the river instead."
DESIGNS = ["A calm, low voice", "A bright young woman", "An old storyteller", "", "A fast, crisp voice"]
CHUNK = 3  # patches an Audio event: 0.48 s (the worker's first chunk)
# The profiled batch's patches: one chunk. Under torch.profiler a step's thousands of small ops are
# slow to record: 64 rows of 8 patches outlasted 110 s on an H200 (2026-12-04).
PROFILE_PATCHES = 3
GIB = 2**30


def size(n: float) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / 2**20:.1f} MiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"], help="bf16: as the real weights run")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 4, 16, 32])
    parser.add_argument("--patches", type=int, default=32, help="patches (160 ms of audio each) every row makes")
    parser.add_argument("--runs", type=int, default=1, help="runs at each batch size (the last one tabled)")
    parser.add_argument("--budget", type=float, default=200, help="seconds for the whole script, load included")
    parser.add_argument("--size", default="full", choices=["tiny", "full"])
    parser.add_argument("--checkpoint", default="", help="default: /tmp/voxcpm-<size>")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="ROWS",
        help=f"then torch.profiler over a batch of ROWS rows of {PROFILE_PATCHES} patches (on a GPU)",
    )
    args = parser.parse_args()
    began = time.monotonic()
    path = Path(args.checkpoint or f"/tmp/voxcpm-{args.size}")

    import torch
    import transformers

    from inference.voxcpm.checkpoint import make_checkpoint
    from inference.voxcpm.engine import VoxCPMEngine
    from inference.voxcpm.spec import PATCHES_PER_SECOND

    print(f"torch {torch.__version__}, transformers {transformers.__version__}", flush=True)
    if args.device.startswith("cuda"):
        print(f"{torch.cuda.get_device_name(0)}, {torch.cuda.get_device_properties(0).total_memory / GIB:.0f} GiB")
    if not (path / "checkpoint.json").exists():
        started = time.monotonic()
        make_checkpoint(args.size, path)
        print(f"made the {args.size} random checkpoint in {path} in {time.monotonic() - started:.1f} s", flush=True)
    started = time.monotonic()
    engine = VoxCPMEngine.load(str(path), device=args.device, fixed_length=True)
    cuda = engine.device.type == "cuda"
    sync(engine.device)
    print(f"loaded {engine.model_version} on {engine.device} in {time.monotonic() - started:.1f} s", flush=True)
    if args.dtype == "bf16":
        to_bfloat16(engine)
    weights = sum(p.numel() * p.element_size() for p in engine.model.parameters())
    line = f"{args.dtype}: weights {size(weights)}"
    if cuda:
        torch.cuda.empty_cache()
        line += f", allocated {torch.cuda.memory_allocated(engine.device) / GIB:.2f} GiB with the model on it"
    print(line, flush=True)
    started = time.monotonic()
    engine.warm_up()  # first-use costs (allocator, kernels) out of the figures
    sync(engine.device)
    print(f"warm-up (one row of 4 patches) {time.monotonic() - started:.2f} s", flush=True)

    seconds = args.patches / PATCHES_PER_SECOND
    print(f"every row {args.patches} patches ({seconds:.2f} s of audio); chunks of {CHUNK} patches", flush=True)
    table: list[dict] = []
    last: dict | None = None
    for n in args.batches:
        result = None
        for run in range(1, args.runs + 1):
            left = args.budget - (time.monotonic() - began)
            guess = last["wall"] * max(1.0, n / last["rows"]) if last else 0.0  # at worst linear in the rows
            if last and guess > left:  # the profile may still fit: it runs few patches
                print(f"time budget: batch {n} run {run} skipped ({left:.0f} s left, ~{guess:.0f} s needed)")
                break
            try:
                result = last = measure(engine, n, args.patches, seconds)
            except Exception:  # memory, a kernel: the figures so far still stand
                traceback.print_exc()
                print(f"batch {n}: failed", flush=True)
                return report(table + ([result] if result else []), args, began, failed=True)
            print(f"batch {n:>2} run {run}: " + describe(result), flush=True)
        if result is None:
            break
        table.append(result)
    if args.profile and cuda and time.monotonic() - began < args.budget:
        from common import cuda_profile

        cuda_profile(
            f"{args.profile} rows of {PROFILE_PATCHES} patches",
            lambda: measure(engine, args.profile, PROFILE_PATCHES, PROFILE_PATCHES / PATCHES_PER_SECOND),
        )
    return report(table, args, began, failed=False)


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def to_bfloat16(engine) -> None:
    """The model in bfloat16 but its AudioVAE, as `VoxCPM2Model.from_local` loads the real weights
    (their config.json says bfloat16); before the engine's first batch (its slots take the LM's dtype)."""
    import torch

    model = engine.model
    model.to(torch.bfloat16)
    model.audio_vae.to(torch.float32)
    model.config.dtype = "bfloat16"


def measure(engine, n: int, patches: int, seconds: float) -> dict:
    """One batch of `n` fixed-length rows, each its own design and seed, timed from the call to the
    last event (the device synchronised at both ends)."""
    import torch

    from inference.batch import Audio, BatchRow
    from inference.voxcpm.params import VoxCPMParams

    rows = [BatchRow(f"r{i}", TEXT, VoxCPMParams(design=DESIGNS[i % len(DESIGNS)], seed=i), patches) for i in range(n)]
    cuda = engine.device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(engine.device)
    sync(engine.device)
    firsts: dict[str, float] = {}
    samples = dict.fromkeys((r.key for r in rows), 0)
    started = time.perf_counter()
    for event in engine.run_rows(rows, lambda key: False, CHUNK):
        if isinstance(event, Audio):
            firsts.setdefault(event.key, time.perf_counter() - started)
            samples[event.key] += len(event.samples)
    sync(engine.device)
    wall = time.perf_counter() - started
    rate = engine.sample_rate
    short = [k for k, s in samples.items() if s < round(seconds * rate)]
    result = {
        "rows": n,
        "wall": wall,
        "audio": sum(samples.values()) / rate,
        "rtf": wall / seconds,
        "first": min(firsts.values(), default=float("nan")),
        "first_last": max(firsts.values(), default=float("nan")),
        "step": (wall - max(firsts.values(), default=wall)) / max(1, patches - CHUNK),
        "short": short,
        "slots": slot_bytes(engine),
    }
    if cuda:
        result["peak"] = torch.cuda.max_memory_allocated(engine.device)
        result["reserved"] = torch.cuda.memory_reserved(engine.device)
    return result


def slot_bytes(engine) -> int:
    """The KV slots both LMs hold for the rows (kept with the engine's idle batch for the next one)."""
    return sum(b.base.nbytes() + b.residual.nbytes() for b in getattr(engine, "_idle", []))


def describe(r: dict) -> str:
    line = (
        f"{r['audio'] / r['wall']:7.2f}x real time (aggregate), wall {r['wall']:6.2f} s, RTF {r['rtf']:.3f} a row, "
        f"first audio {r['first']:.3f} s (every row's by {r['first_last']:.3f} s), "
        f"step {r['step'] * 1000:.1f} ms, KV slots {size(r['slots'])}"
    )
    if "peak" in r:
        line += f", peak allocated {r['peak'] / GIB:.2f} GiB, reserved {r['reserved'] / GIB:.2f} GiB"
    if r["short"]:
        line += f"; rows short of their budget: {', '.join(r['short'])}"
    return line


def report(table: list[dict], args, began: float, failed: bool) -> int:
    """The last run at each batch size as a Markdown table (for docs/benchmarks.md); 1 if a batch failed."""
    if table:
        memory = "peak allocated / reserved" if "peak" in table[0] else "KV slots"
        print(f"\n{args.dtype}, {args.patches} patches a row, chunks of {CHUNK}:")
        print(f"| rows | aggregate x real time | wall | RTF a row | first audio | step | {memory} |")
        print("|---|---|---|---|---|---|---|")
        for r in table:
            mem = size(r["slots"])
            if "peak" in r:
                mem = f"{r['peak'] / GIB:.2f} / {r['reserved'] / GIB:.2f} GiB"
            print(
                f"| {r['rows']} | {r['audio'] / r['wall']:.2f} | {r['wall']:.2f} s | {r['rtf']:.3f} | "
                f"{r['first']:.3f} s | {r['step'] * 1000:.1f} ms | {mem} |"
            )
    done = [r["rows"] for r in table]
    print(f"batches measured: {done or 'none'} of {args.batches}; {time.monotonic() - began:.0f} s in all", flush=True)
    return 1 if failed or not table else 0


if __name__ == "__main__":
    sys.exit(main())
