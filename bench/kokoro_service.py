"""Kokoro through the service, against Kokoro's own engine calls measured in the same run.

    .venv/bin/python bench/kokoro_service.py [--size full] [--runs 5] [--clients 4 8] [--jobs 500]

One Kokoro worker process (TTS_MAX_BATCH = the largest client count) behind the web, on the
random checkpoint (noise, not speech: the compute is real). Every request has a text of its own
(Kokoro caches every request, seeded or not), all texts of the same length. Prints:

1. first audio: the time to the first byte of a streamed `POST /v1/audio/speech` against the
   engine's own `stream` (its first chunk) for the same texts, in this process while the worker
   is idle; the ratio of the medians (target: at most 1.05);
2. concurrency: N clients released together, aggregate audio seconds per wall second and errors,
   against the engine's own `generate_batch` of the same N requests' segments (target: at least
   0.9 of it);
3. memory: the worker's resident set after every 50 of `--jobs` requests (target: at most 1 GB,
   flat).
Asserts nothing.
"""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path

from common import CountingSink, Stack, checkpoint, setup

VOICES = ["af_heart", "am_adam", "bf_emma", "bm_george", "af_sky", "am_michael", "bf_alice", "bm_lewis"]


def text(i: int) -> str:
    return f"Hello there, my old friend number {i:04d}."  # every text the same length, each its own


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    def extra(parser):
        parser.add_argument("--clients", type=int, nargs="+", default=[4, 8])
        parser.add_argument("--jobs", type=int, default=500)

    args = setup(__doc__, runs=5, extra=extra)
    import httpx

    from inference import registry
    from inference.batch import BatchRow
    from inference.engine import EngineOptions, SynthesisRequest
    from inference.kokoro.params import KokoroParams
    from inference.kokoro.spec import SPEC as KOKORO
    from inference.spec import SAMPLE_RATE

    model_dir = checkpoint(args.size, "kokoro")
    most = max(args.clients)
    engine = registry.load("kokoro", EngineOptions(model_dir=model_dir, device="cpu", threads=0))
    engine.warm_up()

    def params(i: int) -> KokoroParams:
        return KokoroParams(voice=((VOICES[i % len(VOICES)], 1.0),))

    def segments(i: int) -> list[str]:
        return [engine.read(s) for s in KOKORO.prepare(text(i)).segments]

    def engine_first_audio(i: int) -> float:
        started = time.perf_counter()
        chunks = engine.stream(SynthesisRequest(segments(i), params(i)))
        next(iter(chunks))
        first = time.perf_counter() - started
        for _ in chunks:
            pass
        return first

    def engine_batch(first: int, n: int) -> tuple[float, float]:
        """The N requests' segments (as the service cuts them) in one `generate_batch`."""
        rows = [
            BatchRow(f"{i}:{j}", segment, params(i), engine.row_budget(segment, params(i)))
            for i in range(first, first + n)
            for j, segment in enumerate(segments(i))
        ]
        sink = CountingSink()
        started = time.perf_counter()
        engine.generate_batch(rows, sink)
        return time.perf_counter() - started, sink.samples / SAMPLE_RATE

    with Stack(model_dir, engine="kokoro", TTS_MAX_BATCH=str(most)) as stack:
        headers = {"Authorization": f"Bearer {stack.key}"}
        body = {"model": "kokoro", "response_format": "pcm"}
        counter = [1000]

        def fresh() -> int:
            counter[0] += 1
            return counter[0]

        def service_first_audio(http: httpx.Client, i: int) -> tuple[float, int]:
            started = time.perf_counter()
            first = None
            size = 0
            payload = {**body, "input": text(i), "voice": VOICES[i % len(VOICES)]}
            with http.stream("POST", f"{stack.base_url}/v1/audio/speech", json=payload, headers=headers) as response:
                for chunk in response.iter_bytes():
                    if first is None and chunk:
                        first = time.perf_counter() - started
                    size += len(chunk)
            assert first is not None, response.status_code
            return first, size

        with httpx.Client(timeout=600) as http:
            service_first_audio(http, fresh())  # warm the path
            service, direct = [], []
            for _ in range(args.runs):
                stack.wait_idle()
                service.append(service_first_audio(http, fresh())[0])
                stack.wait_idle()
                direct.append(engine_first_audio(fresh()))
        s, d = statistics.median(service), statistics.median(direct)
        print("1. first audio (s), median of", args.runs)
        print(f"   engine stream {d:.3f} (runs {', '.join(f'{x:.3f}' for x in direct)})")
        print(f"   through the service {s:.3f} (runs {', '.join(f'{x:.3f}' for x in service)})")
        print(f"   service / engine = {s / d:.3f}  (target <= 1.05)")

        print("2. concurrent clients: aggregate audio s per wall s")
        for n in args.clients:
            stack.wait_idle()
            first = fresh()
            counter[0] += n
            seconds, audio = engine_batch(first, n)
            engine_rate = audio / seconds
            stack.wait_idle()
            first = fresh()
            counter[0] += n
            gate = threading.Barrier(n + 1)
            results: list[tuple[int, float]] = []

            def client(i: int, gate: threading.Barrier, results: list) -> None:
                with httpx.Client(timeout=600) as http:
                    payload = {**body, "input": text(i), "voice": VOICES[i % len(VOICES)]}
                    gate.wait()
                    response = http.post(f"{stack.base_url}/v1/audio/speech", json=payload, headers=headers)
                    results.append((response.status_code, len(response.content) / 2 / SAMPLE_RATE))

            threads = [threading.Thread(target=client, args=(first + i, gate, results)) for i in range(n)]
            for t in threads:
                t.start()
            gate.wait()
            started = time.perf_counter()
            for t in threads:
                t.join()
            wall = time.perf_counter() - started
            errors = sum(1 for status, _ in results if status != 200)
            service_rate = sum(a for _, a in results) / wall
            print(
                f"   {n} clients: service {service_rate:.2f}, engine batch {engine_rate:.2f}, "
                f"ratio {service_rate / engine_rate:.2f} (target >= 0.9), errors {errors}"
            )

        print(f"3. the worker's resident set (MB) over {args.jobs} requests, 4 clients at a time")
        pid = stack.worker.popen.pid
        samples = [(0, rss_mb(pid))]
        done = [0]
        lock = threading.Lock()

        def loader() -> None:
            with httpx.Client(timeout=600) as http:
                while True:
                    with lock:
                        if done[0] >= args.jobs:
                            return
                        done[0] += 1
                        n = done[0]
                        i = fresh()
                    payload = {**body, "input": text(i), "voice": VOICES[i % len(VOICES)]}
                    http.post(f"{stack.base_url}/v1/audio/speech", json=payload, headers=headers)
                    if n % 50 == 0:
                        samples.append((n, rss_mb(pid)))

        threads = [threading.Thread(target=loader) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        samples.sort()
        print("   " + ", ".join(f"{n}: {mb:.0f}" for n, mb in samples))
        after_warmup = [mb for n, mb in samples if n >= 50]
        print(
            f"   max {max(mb for _, mb in samples):.0f} MB (target <= 1024); from request 50 to {args.jobs}: "
            f"{after_warmup[-1] - after_warmup[0]:+.0f} MB"
        )


if __name__ == "__main__":
    main()
