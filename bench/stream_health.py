"""Stream health from the client's side: a streamed `POST /v1/audio/speech` (pcm) of 1, 3, 6 and 12
sentences, alone and with several streams at once, through a private stack (Redis, uvicorn, one
Kokoro worker). For each stream, from its bytes' arrival times:

- first audio: seconds from the request to its first byte;
- underrun: seconds a real-time player, started at the first byte, would have had nothing to play
  (each chunk that arrives after the audio before it has played adds the wait);
- the machine's aggregate real time over the streams at once (audio seconds made per wall second)
  against the streams' demand (one audio second a second each): where supply is below demand, some
  underrun cannot be avoided.

Then `--barge-in` times: a 6-sentence reply closed at its first byte (the listener spoke), and at
once the next reply of one sentence: its first audio against the same request's when the worker is
idle (target: ≤ 1.2x). The closed reply's rows must stop for the next to come early. And the stop
latency: from the client's close to the worker's end of that reply's compute (its job's `error` event,
stamped by Redis as the worker appended it; target ≤ 250 ms on Kokoro, one step on ChatTTS).

Weights: Kokoro's real ones (var/checkpoints/kokoro-real, voice jf_alpha: real sentence lengths), or
`--weights full` (the random full-size checkpoint: the random duration head decides lengths); or
`--engine chattts` or `voxcpm` (a random checkpoint of `--size`: noise, whose length the random weights
decide; their streams are made step by step, the stop checked at each step). Audio is not cached
(TTS_CACHE_MAX_ENTRY_BYTES=1): every request is computed.

    .venv/bin/python bench/stream_health.py [--sentences 1 3 6 12] [--streams 1 4] [--weights real]
    .venv/bin/python bench/stream_health.py --engine chattts --size tiny --sentences 1 3 --streams 1
"""

from __future__ import annotations

import statistics
import threading
import time

from common import ROOT, Stack, checkpoint, setup

BYTES_PER_SECOND = 24000 * 2  # pcm: 24 kHz, 16-bit, mono
REAL = ROOT / "var" / "checkpoints" / "kokoro-real"
BODY = {"model": "kokoro", "voice": "jf_alpha", "response_format": "pcm"}  # --engine chattts: its own


def sentences() -> list[str]:
    lines = (ROOT / "bench/sentences/read.txt").read_text().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def underrun(arrivals: list[tuple[float, int]]) -> float:
    """Seconds a real-time player started at the first byte waits for audio, over the stream."""
    if not arrivals:
        return 0.0
    start, played, stalled = arrivals[0][0], 0.0, 0.0
    for at, size in arrivals:
        runs_out = start + played / BYTES_PER_SECOND + stalled  # when the audio so far has played
        if at > runs_out:
            stalled += at - runs_out
        played += size
    return stalled


def stream(base_url: str, key: str, text: str, out: dict) -> None:
    import httpx

    body = {**BODY, "input": text}
    started = time.perf_counter()
    arrivals = []
    with (
        httpx.Client(timeout=600) as http,
        http.stream("POST", f"{base_url}/v1/audio/speech", json=body, headers={"Authorization": f"Bearer {key}"}) as r,
    ):
        for chunk in r.iter_bytes():
            if chunk:
                arrivals.append((time.perf_counter() - started, len(chunk)))
        out["status"] = r.status_code
    out["first"] = arrivals[0][0] if arrivals else float("nan")
    out["underrun"] = underrun(arrivals)
    out["audio"] = sum(size for _, size in arrivals) / BYTES_PER_SECOND
    out["wall"] = time.perf_counter() - started


def barge_in(base_url: str, key: str, long_text: str, short_text: str, redis) -> tuple[float, float]:
    """A reply closed at its first byte (the listener spoke), then at once the next reply: that
    reply's first audio (s), and the closed reply's stop latency (s, from the close to the worker's
    end of its compute). The closed reply's sentences must stop for the next to come early."""
    import httpx

    body = {**BODY, "input": long_text}
    with httpx.Client(timeout=600) as http:
        with http.stream(
            "POST", f"{base_url}/v1/audio/speech", json=body, headers={"Authorization": f"Bearer {key}"}
        ) as r:
            job_id = r.headers["x-job-id"]
            for chunk in r.iter_bytes():
                if chunk:
                    break  # the connection closes with the block
    closed = time.time()
    out: dict = {}
    stream(base_url, key, short_text, out)
    return out["first"], worker_end(redis, job_id) - closed


def worker_end(redis, job_id: str, timeout: float = 60) -> float:
    """When the worker ended the job's compute: its closing event's Redis stamp (the machine's clock)."""
    from synthesis.audio.streams import stream_key

    deadline = time.time() + timeout
    while time.time() < deadline:
        for entry_id, fields in redis.xrange(stream_key(job_id)):
            if fields.get(b"type") in (b"error", b"end"):
                return int(entry_id.decode().split("-")[0]) / 1000
        time.sleep(0.05)
    raise TimeoutError(f"job {job_id} did not end within {timeout} s")


def main() -> None:
    def extra(parser):
        parser.add_argument("--sentences", type=int, nargs="+", default=[1, 3, 6, 12])
        parser.add_argument("--streams", type=int, nargs="+", default=[1, 4])
        parser.add_argument("--weights", default="real", choices=["real", "full"])
        parser.add_argument("--engine", default="kokoro", choices=["kokoro", "chattts", "voxcpm"])
        parser.add_argument("--barge-in", type=int, default=3, help="barge-ins after the table (0: none)")

    args = setup(__doc__, runs=1, extra=extra)
    if args.engine != "kokoro":
        model_dir = checkpoint(args.size, args.engine)
        BODY.update(model=args.engine, voice="alloy")
    else:
        model_dir = checkpoint("full", "kokoro") if args.weights == "full" else str(REAL)
    pool = sentences()
    used = [0]

    def text(n: int) -> str:  # sentences not asked before in this run (no cache to hit anyway)
        picked = [pool[(used[0] + i) % len(pool)] for i in range(n)]
        used[0] += n
        return " ".join(picked)

    table = []
    with Stack(model_dir, engine=args.engine, TTS_MAX_BATCH="8", TTS_CACHE_MAX_ENTRY_BYTES="1") as stack:
        warm = {}
        stream(stack.base_url, stack.key, text(2), warm)  # the path's first-use costs
        for n in args.sentences:
            for streams in args.streams:
                for _ in range(args.runs):
                    stack.wait_idle()
                    results = [{} for _ in range(streams)]
                    threads = [
                        threading.Thread(target=stream, args=(stack.base_url, stack.key, text(n), r)) for r in results
                    ]
                    began = time.perf_counter()
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
                    wall = time.perf_counter() - began
                    bad = [r.get("status") for r in results if r.get("status") != 200]
                    row = {
                        "sentences": n,
                        "streams": streams,
                        "first": [r["first"] for r in results],
                        "underrun": [r["underrun"] for r in results],
                        "audio": sum(r["audio"] for r in results),
                        "wall": wall,
                        "errors": len(bad),
                    }
                    table.append(row)
                    print(describe(row), flush=True)
        if args.barge_in:
            idle, after, stops = [], [], []
            for _ in range(args.barge_in):
                stack.wait_idle()
                one: dict = {}
                stream(stack.base_url, stack.key, text(1), one)
                idle.append(one["first"])
                stack.wait_idle()
                first, stop = barge_in(stack.base_url, stack.key, text(6), text(1), stack.redis)
                after.append(first)
                stops.append(stop)
            print(
                f"next reply's first audio: idle {', '.join(f'{x:.2f}' for x in idle)} s; after a barge-in "
                f"{', '.join(f'{x:.2f}' for x in after)} s; medians {statistics.median(idle):.2f} / "
                f"{statistics.median(after):.2f} s (x{statistics.median(after) / statistics.median(idle):.2f})\n"
                f"stop latency (close to the worker's end): {', '.join(f'{x * 1000:.0f}' for x in stops)} ms; "
                f"median {statistics.median(stops) * 1000:.0f} ms",
                flush=True,
            )
    print("\n| sentences | streams | audio a stream | first audio p50 / max | underrun mean / max", end="")
    print(" | supply / demand | errors |")
    print("|---|---|---|---|---|---|---|")
    for row in table:
        per = row["audio"] / row["streams"]
        supply = row["audio"] / row["wall"]
        print(
            f"| {row['sentences']} | {row['streams']} | {per:.1f} s | {statistics.median(row['first']):.2f} / "
            f"{max(row['first']):.2f} s | {statistics.mean(row['underrun']):.2f} / {max(row['underrun']):.2f} s | "
            f"{supply:.2f} / {row['streams']} | {row['errors']} |"
        )


def describe(row: dict) -> str:
    firsts = ", ".join(f"{f:.2f}" for f in row["first"])
    underruns = ", ".join(f"{u:.2f}" for u in row["underrun"])
    return (
        f"{row['sentences']:>2} sentences x {row['streams']} streams: first audio {firsts} s; underrun {underruns} s; "
        f"{row['audio']:.1f} s of audio in {row['wall']:.1f} s; errors {row['errors']}"
    )


if __name__ == "__main__":
    main()
