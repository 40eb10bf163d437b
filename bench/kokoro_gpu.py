"""Kokoro-82M on a GPU (or any device), without Django: the engine's batch path (`KokoroEngine`'s
`_forward`: the padded text side, the first sentence in windows, the padded decoder, the edge trim)
at growing batch sizes. Run by bench/gpu.sh.

Weights: `--model-dir` (the real weights, `manage.py make_checkpoint --engine kokoro --size real`), else
the random checkpoint of `--size` in `/tmp/kokoro-<size>` (made if absent; noise, not speech: the
random duration head decides how long each sentence lasts).

The text side: the sentences (bench/sentences/read.txt and long.txt, each row its own sentence and
voice) become the engine's pieces through its own G2P where misaki is installed. A device without
the G2P's packages (spaCy, blis, babel, espeak-ng: ~90 MB, more than a device call carries) reads
them from `--pieces FILE`, written beforehand on a machine that has them (`--write-pieces FILE`); the
G2P's time a sentence is printed there, since it is host work that adds to first audio.

Printed, at each batch size (`--batches`):
- aggregate audio seconds per wall second (the issue's "audio-seconds per second batched"), and the
  wall time of the batch;
- first audio: the first `Audio` event of the batch's first row, decoded in windows (`early`);
- device memory: peak allocated and reserved (peak stats reset before each batch).
Then, once: first audio of one row alone (the live request's case), and the equivalence checks: a
row's audio alone against the same row in the largest batch, and (on a GPU) against the same row on
the CPU, as the largest difference relative to the row's peak.

    python3 bench/kokoro_gpu.py --device cuda [--batches 1 8 32 64 128] [--runs 2] [--budget 90]
        [--precisions fp32 bf16] [--fused off compiled]   # each precision op by op, then fused
    .venv/bin/python bench/kokoro_gpu.py --write-pieces .gpu/kokoro_pieces.pkl   # here, for the device
    .venv/bin/python bench/kokoro_gpu.py --device cpu --size tiny --batches 1 4   # the script's own check
"""

from __future__ import annotations

import argparse
import importlib.util
import pickle
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GIB = 2**30
ROWS = 128  # sentences prepared: the largest batch


def sentences(n: int) -> list[str]:
    from inference.text.preparation import split_sentences

    read = [line for line in (ROOT / "bench/sentences/read.txt").read_text().splitlines() if line and line[0] != "#"]
    long = (ROOT / "bench/sentences/long.txt").read_text().splitlines()[1:]
    found = read + [s for para in long if para.strip() for s in split_sentences(para)]
    return found[:n]


def bare_kokoro() -> None:
    """kokoro's package imports its pipeline (misaki, spaCy) on import; the model classes need only
    torch and transformers. Without misaki, register the package without running its __init__."""
    if importlib.util.find_spec("misaki") is not None or "kokoro" in sys.modules:
        return
    spec = importlib.util.find_spec("kokoro")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("kokoro is not installed")
    package = types.ModuleType("kokoro")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["kokoro"] = package


def write_pieces(path: Path) -> None:
    from inference.kokoro import engine as kokoro_engine
    from inference.kokoro.params import KokoroParams

    params = KokoroParams(voice=(("af_heart", 1.0),))
    texts = sentences(ROWS)
    kokoro_engine._row_pieces(texts[0], params)  # the G2P's dictionaries loaded
    started = time.perf_counter()
    table, times = {}, []
    for text in texts:
        t = time.perf_counter()
        table[text] = kokoro_engine._row_pieces(text, params)
        times.append(time.perf_counter() - t)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(table))
    print(
        f"{len(table)} sentences' pieces in {path}; G2P a sentence median {statistics.median(times) * 1000:.1f} ms, "
        f"max {max(times) * 1000:.1f} ms ({time.perf_counter() - started:.1f} s in all)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--precisions",
        nargs="+",
        default=["fp32"],
        choices=["fp32", "bf16"],
        help="the sweep in each (bf16: the generator's resblocks, as TTS_PRECISION=bf16)",
    )
    parser.add_argument(
        "--fused",
        nargs="+",
        default=["off"],
        choices=["off", "compiled"],
        help="the sweep with the generator's AdaIN + Snake op by op, and/or fused by torch.compile",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="torch.profiler over the largest batch: kernel time against the wall, launches, top kernels",
    )
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 64, 128])
    parser.add_argument("--runs", type=int, default=2, help="runs at each batch size (the fastest tabled)")
    parser.add_argument("--budget", type=float, default=90, help="seconds for the whole script, load included")
    parser.add_argument("--size", default="full", choices=["tiny", "full"])
    parser.add_argument("--model-dir", default="", help="default: /tmp/kokoro-<size>, made if absent")
    parser.add_argument("--pieces", default="", help="the sentences' pieces, where misaki is not installed")
    parser.add_argument("--write-pieces", default="", help="write the sentences' pieces here, then stop")
    args = parser.parse_args()
    if args.write_pieces:
        write_pieces(Path(args.write_pieces))
        return 0
    began = time.monotonic()
    bare_kokoro()

    import torch

    from inference.base import pick_device
    from inference.batch import Audio, BatchRow, Done
    from inference.kokoro import engine as kokoro_engine
    from inference.kokoro import fused as fused_ops
    from inference.kokoro import weights
    from inference.kokoro.checkpoint import make_checkpoint
    from inference.kokoro.params import KokoroParams

    if args.pieces:
        table = pickle.loads(Path(args.pieces).read_bytes())
        kokoro_engine._row_pieces = lambda text, params: table[text]  # the G2P's output, made elsewhere
    print(f"torch {torch.__version__}", flush=True)
    path = Path(args.model_dir or f"/tmp/kokoro-{args.size}")
    if not (path / "config.json").exists():
        started = time.monotonic()
        make_checkpoint(args.size, path)
        print(f"made the {args.size} random checkpoint in {path} in {time.monotonic() - started:.1f} s", flush=True)

    def engine_on(device: str):
        dev = pick_device(device)
        files = weights.local_files(str(path))
        model = weights.load(files, dev)
        return kokoro_engine.KokoroEngine(model, files.voices, dev, "bench", files.random_weights)

    started = time.monotonic()
    engine = engine_on(args.device)
    cuda = engine.device.type == "cuda"
    if cuda:
        print(f"{torch.cuda.get_device_name(0)}, {torch.cuda.get_device_properties(0).total_memory / GIB:.0f} GiB")
    print(f"loaded {path} on {engine.device} in {time.monotonic() - started:.1f} s", flush=True)
    voices = sorted(engine.voices)
    texts = sentences(ROWS)

    def row(i: int, early: bool = False):
        return BatchRow(f"r{i}", texts[i % len(texts)], KokoroParams(voice=((voices[i % len(voices)], 1.0),)), 0, early)

    def rows(n: int) -> list:  # the first row's first audio awaited, as a live request's
        return [row(i, i == 0) for i in range(n)]

    def run(on, batch: list) -> dict:
        if on.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        audio: dict[str, list] = {r.key: [] for r in batch}
        first = None
        started = time.perf_counter()
        for event in on.run_rows(batch, lambda key: False):
            if isinstance(event, Audio):
                first = first if first is not None else time.perf_counter() - started
                audio[event.key].append(event.samples)
            elif not isinstance(event, Done):
                raise TypeError(event)
        wall = time.perf_counter() - started
        joined = {k: torch.from_numpy(np.concatenate(v)) if v else torch.zeros(0) for k, v in audio.items()}
        seconds = sum(len(v) for v in joined.values()) / on.sample_rate
        result = {"rows": len(batch), "wall": wall, "first": first, "seconds": seconds, "audio": joined}
        if on.device.type == "cuda":
            result["peak"] = torch.cuda.max_memory_allocated()
            result["reserved"] = torch.cuda.memory_reserved()
        return result

    started = time.monotonic()
    run(engine, rows(2))  # kernels, allocator, cuDNN's choices
    print(f"warm-up (two rows) {time.monotonic() - started:.2f} s", flush=True)
    tables = {}
    for mode in args.fused:
        fused_ops.use_fused(mode)
        if mode != "off":  # its compilations (one row; padded rows) before the sweep, timed
            started = time.monotonic()
            run(engine, rows(1)), run(engine, rows(2))
            print(f"== fused {mode}: compiled and warmed up in {time.monotonic() - started:.1f} s", flush=True)
        for precision in args.precisions:
            engine.precision, engine.dtype = precision, torch.bfloat16 if precision == "bf16" else None
            name = precision if mode == "off" else f"{precision}, AdaIN + Snake {mode}"
            print(f"== {name}", flush=True)
            tables[name] = sweep(engine, args, began, rows, run)
    engine.precision, engine.dtype = "fp32", None
    fused_ops.use_fused(args.fused[-1])
    table_rows = list(tables.values())[-1]  # the last variant: the mode the rest runs in
    if len(args.fused) > 1:  # the fused formula against kokoro's ops: row 1 alone, then in the largest batch
        fused_rows = tables[f"fp32, AdaIN + Snake {args.fused[-1]}"] if "fp32" in args.precisions else []
        fused_ops.use_fused(args.fused[0])
        plain = run(engine, [row(1)])["audio"]["r1"]
        fused_ops.use_fused(args.fused[-1])
        fused_alone = run(engine, [row(1)])["audio"]["r1"]
        print(f"row 1 alone, fused {args.fused[-1]} vs {args.fused[0]}: {difference(fused_alone, plain)}")
        if fused_rows and fused_rows[-1]["rows"] > 1:
            big = fused_rows[-1]
            where = f"row 1 in the fused batch of {big['rows']} vs alone, {args.fused[0]}"
            print(f"{where}: {difference(big['audio']['r1'], plain)}")
    for name, swept in tables.items():
        print(f"\nKokoro {name} on {engine.device}, {'random' if engine.random_weights else 'real'} weights:")
        print("| rows | audio s per s | wall | first audio | audio | peak allocated | reserved |")
        print("|---|---|---|---|---|---|---|")
        for r in swept:
            print(
                f"| {r['rows']} | {r['seconds'] / r['wall']:.1f} | {r['wall']:.3f} s | {r['first'] * 1000:.0f} ms | "
                f"{r['seconds']:.1f} s | {size(r.get('peak', 0))} | {size(r.get('reserved', 0))} |"
            )
    # First audio of one row alone, three times (the live request's case: its first window).
    alone = [run(engine, rows(1)) for _ in range(3)]
    firsts = ", ".join(f"{a['first'] * 1000:.0f}" for a in alone)
    whole = f"{alone[-1]['seconds']:.2f} s of audio in {alone[-1]['wall'] * 1000:.0f} ms"
    print(f"one row alone: first audio {firsts} ms; its whole sentence {whole}", flush=True)
    # Equivalence: row 1 (made whole) alone against the same row in the largest batch, and on the CPU.
    reference = run(engine, [row(1)])["audio"]["r1"]
    if table_rows and table_rows[-1]["rows"] > 1:
        in_batch = table_rows[-1]["audio"]["r1"]
        print(f"row 1 in the batch of {table_rows[-1]['rows']} vs alone: {difference(in_batch, reference)}")
    print(f"row 1, our forward vs KModel.forward_with_tokens on {engine.device}: {own_forward(engine, texts[1])}")
    if args.profile and cuda and table_rows and time.monotonic() - began < args.budget:
        from common import cuda_profile

        batch = rows(table_rows[-1]["rows"])
        cuda_profile(
            f"fp32, fused {args.fused[-1]}, {len(batch)} rows", lambda: list(engine.run_rows(batch, lambda key: False))
        )
    if cuda and time.monotonic() - began < args.budget:
        # The harmonic source's noise comes from the device's generator (seeded alike, but CUDA's
        # draws are not the CPU's): the two agree in length and durations, not in samples.
        cpu = run(engine_on("cpu"), [row(1)])["audio"]["r1"]
        print(f"row 1 on {engine.device} vs on the CPU: {difference(reference, cpu)}")
    print(f"{time.monotonic() - began:.0f} s in all")
    return 0


def sweep(engine, args, began: float, rows, run) -> list[dict]:
    """`run` at each of `args.batches` within what is left of the budget; the fastest run of each."""
    import torch

    table_rows, last = [], None
    for n in args.batches:
        best = None
        for r in range(args.runs):
            left = args.budget - (time.monotonic() - began)
            guess = last["wall"] * max(1.0, n / last["rows"]) if last else 0.0
            if last and guess > left:
                print(f"time budget: batch {n} skipped ({left:.0f} s left, ~{guess:.0f} s needed)", flush=True)
                break
            try:
                result = last = run(engine, rows(n))
            except torch.OutOfMemoryError:
                print(f"batch {n}: out of device memory", flush=True)
                break
            print(f"batch {n:>3} run {r + 1}: {describe(result)}", flush=True)
            best = result if best is None or result["wall"] < best["wall"] else best
        if best is None:
            break
        table_rows.append(best)
    return table_rows


def own_forward(engine, text: str) -> str:
    """A row through our padded forward against kokoro's own one-row forward, its noise seeded alike
    (as tests/test_kokoro_engine.py does on the CPU)."""
    import torch

    from inference.kokoro import engine as kokoro_engine
    from inference.kokoro.forward import forward
    from inference.kokoro.model import SEED, RowInput
    from inference.kokoro.params import KokoroParams

    voice = ((sorted(engine.voices)[1], 1.0),)
    (piece, *_) = kokoro_engine._row_pieces(text, KokoroParams(voice=voice))
    ids = [engine.model.vocab[c] for c in piece.phonemes]
    style = engine.style(voice, len(ids))
    ours = forward(engine.model, [RowInput(ids, style, 1.0)])[0]
    torch.manual_seed(SEED)
    with torch.no_grad():
        theirs, durations = engine.model.forward_with_tokens(
            torch.tensor([[0, *ids, 0]], device=engine.device), style[None], 1.0
        )
    same = "the same durations" if np.array_equal(ours.durations, durations.cpu().numpy()) else "durations differ"
    return f"{same}; {difference(torch.from_numpy(ours.audio), theirs.float().cpu())}"


def describe(r: dict) -> str:
    line = (
        f"{r['seconds'] / r['wall']:8.1f} audio s/s, wall {r['wall']:.3f} s, first audio {r['first'] * 1000:.0f} ms, "
        f"{r['seconds']:.1f} s of audio"
    )
    if "peak" in r:
        line += f", peak {size(r['peak'])}, reserved {size(r['reserved'])}"
    return line


def difference(a, b) -> str:
    if len(a) != len(b):
        return f"lengths differ ({len(a)} vs {len(b)} samples)"
    peak = float(b.abs().max()) or 1.0
    return f"same length ({len(a)} samples), largest difference {float((a - b).abs().max()) / peak:.2e} of the peak"


def size(n: float) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB else f"{n / 2**20:.1f} MiB"


if __name__ == "__main__":
    sys.exit(main())
