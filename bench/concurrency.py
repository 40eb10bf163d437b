"""Concurrent clients through the service, against the engine's own batched call and against
one request at a time, measured in the same run.

    .venv/bin/python bench/concurrency.py [--size full] [--clients 1 2 4 8] [--runs 1]

Fixed-length generation on the random checkpoint (every row runs to its token budget, so every
run does equal work; random weights make noise, not speech). One synthesis worker process with
TTS_MAX_BATCH = the largest client count. For each client count N: N clients released together,
each streaming one `POST /v1/audio/speech` (its own voice and seed): aggregate audio seconds per
wall second, p50/p95 latency, p50 time to first audio, errors. Baselines, in this process with the
worker idle: `generate_batch` of the same N rows (the engine's own batched throughput) and the N
rows one after another. Prints figures; asserts nothing.
"""

from __future__ import annotations

import statistics
import threading
import time

from common import CountingSink, Stack, checkpoint, setup

TEXT = "Hello there, my old friend."  # 215 audio tokens at fixed length: 4.6 s of audio
VOICES = ["alloy", "nova", "echo", "onyx", "fable", "shimmer", "ash", "sage"]


def main() -> None:
    args = setup(
        __doc__, runs=1, extra=lambda p: p.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8])
    )
    import httpx

    from inference.batch import BatchRow
    from inference.chattts.engine import ChatTTSEngine
    from inference.chattts.params import SAMPLES_PER_TOKEN, ChatTTSParams, token_budget
    from inference.chattts.spec import SPEC as CHATTTS
    from inference.chattts.voices import VOICES as VOICE_SEEDS
    from inference.spec import SAMPLE_RATE

    model_dir = checkpoint(args.size)
    (segment,) = CHATTTS.prepare(TEXT).segments
    budget = token_budget(segment)
    most = max(args.clients)

    def rows(n: int, base_seed: int) -> list[BatchRow]:
        return [
            BatchRow(
                key=str(i),
                text=segment,
                params=ChatTTSParams(voice_seed=VOICE_SEEDS[VOICES[i % len(VOICES)]].seed, seed=base_seed + i),
                max_tokens=budget,
            )
            for i in range(n)
        ]

    def engine_run(batch: list[BatchRow]) -> tuple[float, float]:
        sink = CountingSink()
        started = time.perf_counter()
        engine.generate_batch(batch, sink)
        return time.perf_counter() - started, sink.samples / SAMPLE_RATE

    with Stack(model_dir, TTS_BENCH_FIXED_LENGTH="1", TTS_MAX_BATCH=str(most)) as stack:
        headers = {"Authorization": f"Bearer {stack.key}"}

        def client(i: int, seed: int, gate: threading.Barrier, out: list) -> None:
            body = {"input": TEXT, "voice": VOICES[i % len(VOICES)], "seed": seed, "response_format": "pcm"}
            with httpx.Client(timeout=900) as http:
                gate.wait()
                started = time.perf_counter()
                first, size = None, 0
                try:
                    with http.stream("POST", f"{stack.base_url}/v1/audio/speech", json=body, headers=headers) as r:
                        if r.status_code != 200:
                            out[i] = {"error": r.status_code}
                            return
                        for chunk in r.iter_raw():
                            first = first or time.perf_counter() - started
                            size += len(chunk)
                except httpx.HTTPError as exc:
                    out[i] = {"error": type(exc).__name__}
                    return
                out[i] = {"latency": time.perf_counter() - started, "first": first, "seconds": size / 2 / SAMPLE_RATE}

        def service_run(n: int, seed: int) -> dict:
            out: list = [None] * n
            gate = threading.Barrier(n)
            threads = [threading.Thread(target=client, args=(i, seed + i, gate, out)) for i in range(n)]
            started = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - started
            ok = [o for o in out if o and "error" not in o]
            return {
                "wall": wall,
                "errors": n - len(ok),
                "audio": sum(o["seconds"] for o in ok),
                "latencies": [o["latency"] for o in ok],
                "firsts": [o["first"] for o in ok],
            }

        service_run(1, 10_000_000)  # warm the web process and the worker
        stack.wait_idle()
        results = {n: [service_run(n, 1_000 * n + 100 * run) for run in range(args.runs)] for n in args.clients}
        stack.wait_idle()

    engine = ChatTTSEngine.load(model_dir, device="cpu", fixed_length=True)
    engine.warm_up()
    engine_run(rows(1, 5))
    alone_seconds = budget * SAMPLES_PER_TOKEN / SAMPLE_RATE
    first_alone = statistics.median(results[min(args.clients)][0]["firsts"]) if results else 0
    print(f"one request: {alone_seconds:.2f} s of audio ({budget} tokens), fixed length, {args.size} checkpoint")
    for n, runs in results.items():
        batched_wall, batched_audio = engine_run(rows(n, 7_000))
        serial_wall = sum(engine_run(rows(1, 8_000 + i))[0] for i in range(n))
        service = runs[-1]
        latencies = sorted(x for r in runs for x in r["latencies"])
        firsts = sorted(f for r in runs for f in r["firsts"])
        throughput = service["audio"] / service["wall"]
        engine_throughput = batched_audio / batched_wall
        p95 = latencies[min(len(latencies) - 1, int(0.95 * (len(latencies) - 1) + 0.5))] if latencies else 0
        print(
            f"{n} clients: service {throughput:.2f} audio s/s, errors {sum(r['errors'] for r in runs)}, "
            f"latency p50 {statistics.median(latencies) if latencies else 0:.1f} s p95 {p95:.1f} s, "
            f"first audio p50 {statistics.median(firsts) if firsts else 0:.2f} s "
            f"({(statistics.median(firsts) / first_alone) if firsts and first_alone else 0:.2f}x alone) | "
            f"engine batch {engine_throughput:.2f} audio s/s ({batched_wall:.1f} s), "
            f"one at a time {serial_wall:.1f} s | service/engine {throughput / engine_throughput:.2f}, "
            f"service wall / serial {service['wall'] / serial_wall:.2f}"
        )
    print("targets: 0 errors at 8; at 4: service/engine >= 0.9, service wall / serial <= 0.4, first audio <= 1.5x")


if __name__ == "__main__":
    main()
