"""Kokoro through the service, against Kokoro's own engine calls measured in the same run.

    .venv/bin/python bench/kokoro_service.py [--size full] [--runs 5] [--clients 4 8] [--jobs 500] [--warmup 200]
        [--phases first concurrency memory]

One Kokoro worker process (TTS_MAX_BATCH = the largest client count) behind the web, on the
random checkpoint (noise, not speech: the compute is real). Every request has a text of its own
(Kokoro caches every request, seeded or not), all texts of the same length. Prints:

1. first audio: the time to the first byte of a streamed `POST /v1/audio/speech` against the
   engine's own `stream` (its first chunk) for the same texts, in this process while the worker
   is idle; the ratio of the medians (target: at most 1.05);
2. concurrency: N clients released together, aggregate audio seconds per wall second and errors,
   against the engine's own `generate_batch` of the same N requests' segments (target: at least
   0.9 of it);
3. memory: the worker's and the web's resident sets over `--jobs` requests, 4 clients at a time,
   each text with a word never seen before, and once idle again (target: growth after `--warmup`
   requests at most 3 %).
Asserts nothing.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import CountingSink, Stack, checkpoint, setup

VOICES = ["af_heart", "am_adam", "bf_emma", "bm_george", "af_sky", "am_michael", "bf_alice", "bm_lewis"]
SAMPLE_RATE = 24000


def text(i: int) -> str:
    return f"Hello there, my old friend number {i:04d}."  # every text the same length, each its own


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class Run:
    stack: Stack
    engine: object
    next_text: list[int] = field(default_factory=lambda: [1000])

    def fresh(self, n: int = 1) -> int:
        """The first of `n` texts no request has used yet."""
        first = self.next_text[0] + 1
        self.next_text[0] += n
        return first

    def payload(self, i: int) -> dict:
        return {"model": "kokoro", "response_format": "pcm", "input": text(i), "voice": VOICES[i % len(VOICES)]}

    @property
    def headers(self) -> dict:
        return {"Authorization": f"Bearer {self.stack.key}"}

    def params(self, i: int):
        from inference.kokoro.params import KokoroParams

        return KokoroParams(voice=((VOICES[i % len(VOICES)], 1.0),))

    def segments(self, i: int) -> list[str]:
        from inference.kokoro.spec import SPEC as KOKORO

        return [self.engine.read(s) for s in KOKORO.prepare(text(i)).segments]


def first_audio(run: Run, runs: int) -> None:
    import httpx

    from inference.engine import SynthesisRequest

    def engine_first(i: int) -> float:
        started = time.perf_counter()
        chunks = run.engine.stream(SynthesisRequest(run.segments(i), run.params(i)))
        next(iter(chunks))
        first = time.perf_counter() - started
        for _ in chunks:
            pass
        return first

    def service_first(http: httpx.Client, i: int) -> float:
        started = time.perf_counter()
        first = None
        with http.stream(
            "POST", f"{run.stack.base_url}/v1/audio/speech", json=run.payload(i), headers=run.headers
        ) as r:
            for chunk in r.iter_bytes():
                if first is None and chunk:
                    first = time.perf_counter() - started
        assert first is not None, r.status_code
        return first

    with httpx.Client(timeout=600) as http:
        service_first(http, run.fresh())  # warm the path
        service, direct = [], []
        for _ in range(runs):
            run.stack.wait_idle()
            service.append(service_first(http, run.fresh()))
            run.stack.wait_idle()
            direct.append(engine_first(run.fresh()))
    s, d = statistics.median(service), statistics.median(direct)
    print("1. first audio (s), median of", runs)
    print(f"   engine stream {d:.3f} (runs {', '.join(f'{x:.3f}' for x in direct)})")
    print(f"   through the service {s:.3f} (runs {', '.join(f'{x:.3f}' for x in service)})")
    print(f"   service / engine = {s / d:.3f}  (target <= 1.05)")


def concurrency(run: Run, clients: list[int]) -> None:
    import httpx

    from inference.batch import BatchRow

    def engine_batch(first: int, n: int) -> float:
        """The N requests' segments (as the service cuts them) in one `generate_batch`."""
        rows = [
            BatchRow(f"{i}:{j}", segment, run.params(i), run.engine.row_budget(segment, run.params(i)))
            for i in range(first, first + n)
            for j, segment in enumerate(run.segments(i))
        ]
        sink = CountingSink()
        started = time.perf_counter()
        run.engine.generate_batch(rows, sink)
        return sink.samples / SAMPLE_RATE / (time.perf_counter() - started)

    def client(i: int, gate: threading.Barrier, results: list) -> None:
        with httpx.Client(timeout=600) as http:
            gate.wait()
            response = http.post(f"{run.stack.base_url}/v1/audio/speech", json=run.payload(i), headers=run.headers)
            results.append((response.status_code, len(response.content) / 2 / SAMPLE_RATE))

    print("2. concurrent clients: aggregate audio s per wall s")
    for n in clients:
        run.stack.wait_idle()
        engine_rate = engine_batch(run.fresh(n), n)
        run.stack.wait_idle()
        first = run.fresh(n)
        gate = threading.Barrier(n + 1)
        results: list[tuple[int, float]] = []
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


def made_up_name(i: int) -> str:
    """A word no dictionary holds, different for every `i` (four syllables, the same length)."""
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    syllables = []
    for _ in range(4):
        i, k = divmod(i, len(consonants) * len(vowels))
        syllables.append(consonants[k % len(consonants)] + vowels[k // len(consonants)])
    return "".join(syllables).capitalize()


def memory(run: Run, jobs: int, warmup: int) -> None:
    """RSS of the worker and the web over `jobs` requests, each text with a word never seen before
    (what makes spaCy's string store and misaki's caches grow), 4 clients at a time."""
    import httpx

    every = max(50, jobs // 40)
    print(f"3. resident set (MB) over {jobs} requests (a new word each), 4 clients at a time, every {every}")
    worker, web = run.stack.worker.popen.pid, run.stack.web.popen.pid
    samples = [(0, rss_mb(worker), rss_mb(web))]
    done = [0]
    lock = threading.Lock()

    def loader() -> None:
        with httpx.Client(timeout=600) as http:
            while True:
                with lock:
                    if done[0] >= jobs:
                        return
                    done[0] += 1
                    n, i = done[0], run.fresh()
                payload = run.payload(i) | {"input": f"Hello there, my old friend {made_up_name(i)}."}
                response = http.post(f"{run.stack.base_url}/v1/audio/speech", json=payload, headers=run.headers)
                if response.status_code != 200:
                    print(f"   request {n}: {response.status_code} {response.text[:200]}")
                if n % every == 0:
                    samples.append((n, rss_mb(worker), rss_mb(web)))

    threads = [threading.Thread(target=loader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    samples.sort()
    print("   worker: " + ", ".join(f"{n}: {w:.0f}" for n, w, _ in samples))
    print("   web:    " + ", ".join(f"{n}: {h:.0f}" for n, _, h in samples))
    after = [s for s in samples if s[0] >= warmup]
    for name, k in (("worker", 1), ("web", 2)):
        start, end = after[0][k], after[-1][k]
        print(
            f"   {name}: ready {samples[0][k]:.0f}, max {max(s[k] for s in samples):.0f}; from request "
            f"{after[0][0]} to {after[-1][0]}: {end - start:+.0f} MB ({(end - start) / start:+.1%}, target <= +3 %)"
        )
    time.sleep(5)
    print(f"   idle 5 s after the last request: worker {rss_mb(worker):.0f} MB, web {rss_mb(web):.0f} MB")


def main() -> None:
    def extra(parser):
        parser.add_argument("--clients", type=int, nargs="+", default=[4, 8])
        parser.add_argument("--jobs", type=int, default=500)
        parser.add_argument("--warmup", type=int, default=200, help="requests before growth is counted")
        parser.add_argument("--phases", nargs="+", default=["first", "concurrency", "memory"])

    args = setup(__doc__, runs=5, extra=extra)
    from inference import registry
    from inference.engine import EngineOptions

    model_dir = checkpoint(args.size, "kokoro")
    engine = registry.load("kokoro", EngineOptions(model_dir=model_dir, device="cpu", threads=0))
    engine.warm_up()
    with Stack(model_dir, engine="kokoro", TTS_MAX_BATCH=str(max(args.clients))) as stack:
        run = Run(stack, engine)
        if "first" in args.phases:
            first_audio(run, args.runs)
        if "concurrency" in args.phases:
            concurrency(run, args.clients)
        if "memory" in args.phases:
            memory(run, args.jobs, args.warmup)


if __name__ == "__main__":
    main()
