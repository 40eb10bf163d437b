"""Clients arriving one after another while the worker generates: continuous batching (a job
joins the running batch at the next token step) against batches that start only when the
previous one has ended, measured in the same run.

    .venv/bin/python bench/arrivals.py [--size full] [--clients 4] [--every 3]

Fixed-length generation on the random checkpoint (every request does equal work; random weights
make noise, not speech). One synthesis worker process (TTS_MAX_BATCH = clients); client i sends
`POST /v1/audio/speech` (streamed, its own voice and seed) `every` × i seconds after the first.
For each mode: each client's time to first audio and to its last byte, and the wall time. Prints
figures; asserts nothing.
"""

from __future__ import annotations

import statistics
import threading
import time

from common import Stack, checkpoint, setup

TEXT = "Hello there, my old friend."  # 215 audio tokens at fixed length: 4.6 s of audio
VOICES = ["alloy", "nova", "echo", "onyx", "fable", "shimmer", "ash", "sage"]


def main() -> None:
    def options(parser) -> None:
        parser.add_argument("--clients", type=int, default=4)
        parser.add_argument("--every", type=float, default=3.0)

    args = setup(__doc__, runs=1, extra=options)
    import httpx

    def client(base_url: str, key: str, i: int, start: float, out: list, seed: int = 500) -> None:
        body = {"input": TEXT, "voice": VOICES[i % len(VOICES)], "seed": seed + i, "response_format": "pcm"}
        time.sleep(max(0.0, start + i * args.every - time.monotonic()))
        sent = time.monotonic()
        first = None
        with httpx.Client(timeout=900) as http:
            with http.stream(
                "POST", f"{base_url}/v1/audio/speech", json=body, headers={"Authorization": f"Bearer {key}"}
            ) as r:
                if r.status_code != 200:
                    out[i] = {"error": r.status_code}
                    return
                for _ in r.iter_raw():
                    first = first or time.monotonic() - sent
        out[i] = {"first": first, "latency": time.monotonic() - sent}

    results = {}
    for mode, flag in (("batches one after another", "0"), ("continuous batching", "1")):
        with Stack(
            checkpoint(args.size),
            TTS_BENCH_FIXED_LENGTH="1",
            TTS_MAX_BATCH=str(args.clients),
            TTS_CONTINUOUS_BATCHING=flag,
        ) as stack:
            out: list = [None] * 1
            client(stack.base_url, stack.key, 0, time.monotonic(), out, seed=9000)  # warm up (another seed)
            stack.wait_idle()
            out = [None] * args.clients
            start = time.monotonic()
            threads = [
                threading.Thread(target=client, args=(stack.base_url, stack.key, i, start, out))
                for i in range(args.clients)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            results[mode] = (out, time.monotonic() - start)

    print(f"{args.clients} clients, one every {args.every:g} s, {args.size} checkpoint, fixed length (215 tokens each)")
    for mode, (out, wall) in results.items():
        ok = [o for o in out if o and "error" not in o]
        firsts = ", ".join(f"{o['first']:.1f}" for o in ok)
        lasts = ", ".join(f"{o['latency']:.1f}" for o in ok)
        print(
            f"{mode}: errors {len(out) - len(ok)}, first audio per client [{firsts}] s "
            f"(p50 {statistics.median(o['first'] for o in ok):.1f} s), done per client [{lasts}] s, wall {wall:.1f} s"
        )


if __name__ == "__main__":
    main()
