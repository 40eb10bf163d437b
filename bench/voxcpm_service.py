"""VoxCPM2 through the service against VoxCPM2's own engine, both measured in this run, on the
full-size random checkpoint (noise, not speech: the compute is real).

    .venv/bin/python bench/voxcpm_service.py [--size full] [--runs 3] [--clients 4 8] [--threads N]

The engine first, in this process (then unloaded: two copies of a 2 B model do not fit beside each
other here), every row running to its budget (`fixed_length`, as the worker's
TTS_BENCH_FIXED_LENGTH): its first chunk (TTS_STREAM_CHUNK_SECONDS of audio) for one request, and
`run_rows` over N requests' segments at once. Then one VoxCPM2 worker (TTS_MAX_BATCH = the most
clients) behind the web, the same texts and voices:

1. first audio: the first byte of a streamed `POST /v1/audio/speech` (pcm) against the engine's
   first chunk; the ratio of the medians (target: at most 1.1);
2. N clients released together: aggregate audio seconds per wall second against the engine's own
   batch of the same N requests (target: at least 0.9 of it), and errors (target at 8: none).
Each request has a text and a seed of its own (no cache hit). Asserts nothing.
"""

from __future__ import annotations

import gc
import statistics
import threading
import time

from common import Stack, checkpoint, setup

VOICES = ["alloy", "nova", "onyx", "sage", "coral", "echo", "fable", "ash"]
SAMPLE_RATE = 24000  # the pcm the clients ask for (OpenAI's)


def text(i: int) -> str:
    return f"Hello number {i:04d}."  # every text the same length, each its own


def payload(i: int) -> dict:
    return {"model": "voxcpm", "input": text(i), "voice": VOICES[i % len(VOICES)], "seed": i, "response_format": "pcm"}


def engine_figures(model_dir: str, clients: list[int], runs: int, chunk_seconds: float, threads: int) -> dict:
    from inference.batch import Audio, BatchRow
    from inference.voxcpm.engine import VoxCPMEngine
    from inference.voxcpm.params import VoxCPMParams
    from inference.voxcpm.spec import PATCHES_PER_SECOND, SPEC

    engine = VoxCPMEngine.load(model_dir, device="cpu", fixed_length=True, threads=threads)
    engine.warm_up()

    def rows(first: int, n: int) -> list:
        out = []
        for i in range(first, first + n):
            params = VoxCPMParams.from_request({}, {"builtin": VOICES[i % len(VOICES)]}, seed=i)
            for j, segment in enumerate(SPEC.prepare(text(i)).segments):
                read = engine.read(segment)
                out.append(BatchRow(f"{i}:{j}", read, params, engine.row_budget(read, params)))
        return out

    chunk = max(1, round(chunk_seconds * PATCHES_PER_SECOND))
    firsts = []
    for i in range(runs):
        began = time.perf_counter()
        events = engine.run_rows(rows(100 + i, 1), lambda key: False, chunk)
        next(e for e in events if isinstance(e, Audio))
        firsts.append(time.perf_counter() - began)
        events.close()
    figures = {"first": firsts, "patches": rows(0, 1)[0].max_tokens}
    for n in clients:
        samples, began = 0, time.perf_counter()
        for event in engine.run_rows(rows(200, n), lambda key: False, 10**6):
            if isinstance(event, Audio):
                samples += len(event.samples)
        figures[n] = samples / engine.sample_rate / (time.perf_counter() - began)
    return figures  # the engine goes with this frame


def service_first(stack: Stack, runs: int) -> list[float]:
    import httpx

    out = []
    with httpx.Client(timeout=3600) as http:
        for i in range(runs):
            stack.wait_idle(timeout=3600)
            began = time.perf_counter()
            first = None
            with http.stream(
                "POST", f"{stack.base_url}/v1/audio/speech", json=payload(300 + i), headers=headers(stack)
            ) as r:
                for chunk in r.iter_bytes():
                    if first is None and chunk:
                        first = time.perf_counter() - began
            assert first is not None, r.status_code
            out.append(first)
    return out


def headers(stack: Stack) -> dict:
    return {"Authorization": f"Bearer {stack.key}"}


def service_clients(stack: Stack, n: int) -> tuple[float, int]:
    import httpx

    stack.wait_idle(timeout=3600)
    results: list[tuple[int, float]] = []
    gate = threading.Barrier(n + 1)

    def client(i: int) -> None:
        with httpx.Client(timeout=3600) as http:
            gate.wait()
            response = http.post(f"{stack.base_url}/v1/audio/speech", json=payload(i), headers=headers(stack))
            results.append((response.status_code, len(response.content) / 2 / SAMPLE_RATE))

    threads = [threading.Thread(target=client, args=(400 + 10 * n + i,)) for i in range(n)]
    for t in threads:
        t.start()
    gate.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    return sum(seconds for _, seconds in results) / wall, sum(1 for status, _ in results if status != 200)


def main() -> None:
    def extra(parser):
        parser.add_argument("--clients", type=int, nargs="+", default=[4, 8])
        parser.add_argument("--threads", type=int, default=0)
        parser.add_argument("--chunk-seconds", type=float, default=0.5)

    args = setup(__doc__, runs=3, extra=extra)
    model_dir = checkpoint(args.size, "voxcpm")
    engine = engine_figures(model_dir, args.clients, args.runs, args.chunk_seconds, args.threads)
    gc.collect()  # the model's memory back before the worker loads its own
    print(f"rows run to their budget: {engine['patches']} patches ({engine['patches'] / 6.25:.2f} s) a request")
    env = {
        "TTS_MAX_BATCH": str(max(args.clients)),
        "TTS_BENCH_FIXED_LENGTH": "1",
        "TTS_TORCH_THREADS": str(args.threads),
        "TTS_STREAM_CHUNK_SECONDS": str(args.chunk_seconds),
        "TTS_MAX_QUEUE_WAIT": "3600",
        "TTS_QUEUE_TIMEOUT": "3600",
        "TTS_TASK_SOFT_TIME_LIMIT": "3500",
        "TTS_TASK_TIME_LIMIT": "3600",
    }
    with Stack(model_dir, engine="voxcpm", **env) as stack:
        service = service_first(stack, args.runs)
        s, d = statistics.median(service), statistics.median(engine["first"])
        print(f"1. first audio (s), median of {args.runs}")
        print(f"   engine's first chunk {d:.3f} (runs {', '.join(f'{x:.3f}' for x in engine['first'])})")
        print(f"   through the service {s:.3f} (runs {', '.join(f'{x:.3f}' for x in service)})")
        print(f"   service / engine = {s / d:.3f}  (target <= 1.1)")
        print("2. concurrent clients: aggregate audio s per wall s")
        for n in args.clients:
            rate, errors = service_clients(stack, n)
            print(
                f"   {n} clients: service {rate:.3f}, engine batch {engine[n]:.3f}, "
                f"ratio {rate / engine[n]:.2f} (target >= 0.9), errors {errors}"
            )


if __name__ == "__main__":
    main()
