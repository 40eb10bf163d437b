"""What the policy layer costs: requests per second of a cache-hit speech request (key auth, rate
limit, plan limits, concurrency slot, quota reservation, cache lookup, ledger row) against the same
server's trivial authenticated endpoint (GET /v1/voices: key auth and rate limit), in one run.

Closed-loop load from client threads for a fixed time per round; rounds alternate between the two
endpoints so drift hits both. Prints requests/s, the ratio, and latency p50/p99 with the added ms.

    .venv/bin/python bench/auth_quota_overhead.py [--seconds 8] [--rounds 2] [--clients 4]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import httpx
from common import Stack, checkpoint


def load(url: str, key: str, body: dict | None, seconds: float, clients: int) -> tuple[int, list[float]]:
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def client() -> None:
        mine = []
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                r = http.post(url, json=body) if body else http.get(url)
                if r.status_code != 200:
                    raise RuntimeError(f"{r.status_code}: {r.text[:200]}")
                if body:
                    assert r.headers["x-cache"] == "hit"
                mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(latencies), latencies


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    body = {"input": "Welcome back! Your order has shipped.", "voice": "alloy", "seed": 7, "response_format": "pcm"}
    # Limits stay enforced (every request is counted and checked), just high enough for a load test.
    limits = ("requests_per_minute=10000000", "monthly_characters=1000000000", "concurrent_jobs=1000")
    with Stack(checkpoint("tiny"), limits=limits) as stack:
        speech_url, voices_url = f"{stack.base_url}/v1/audio/speech", f"{stack.base_url}/v1/voices"
        headers = {"Authorization": f"Bearer {stack.key}"}
        first = httpx.post(speech_url, json=body, headers=headers, timeout=120)  # fills the cache
        assert first.status_code == 200, first.text
        load(voices_url, stack.key, None, 2, args.clients)  # warm both paths
        load(speech_url, stack.key, body, 2, args.clients)
        results: dict[str, list] = {"voices": [0, 0.0, []], "speech": [0, 0.0, []]}
        for _ in range(args.rounds):
            for name, url, b in (("voices", voices_url, None), ("speech", speech_url, body)):
                count, lat = load(url, stack.key, b, args.seconds, args.clients)
                results[name][0] += count
                results[name][1] += args.seconds
                results[name][2].extend(lat)
    rps = {name: count / secs for name, (count, secs, _) in results.items()}
    print(f"clients: {args.clients}, {args.rounds} rounds × {args.seconds:g} s per endpoint")
    for name, (_, _, lat) in results.items():
        print(f"{name:7s} {rps[name]:7.1f} req/s   p50 {pct(lat, 50):6.1f} ms   p99 {pct(lat, 99):6.1f} ms")
    v, s = results["voices"][2], results["speech"][2]
    print(f"ratio speech/voices: {rps['speech'] / rps['voices']:.3f}  (target >= 0.8)")
    print(f"added by policy+cache: p50 {pct(s, 50) - pct(v, 50):+.1f} ms, p99 {pct(s, 99) - pct(v, 99):+.1f} ms")


if __name__ == "__main__":
    main()
