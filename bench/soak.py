"""Soak: many jobs through one synthesis worker, watching the memory of the worker and web processes.

    .venv/bin/python bench/soak.py [--jobs 500] [--size tiny] [--clients 4]

Requests (each a different seed, so none is a cache hit) go through `POST /v1/audio/speech` from
`--clients` threads. The resident memory (RSS) of the worker process and of the web process is
read from /proc after a warm-up of `--jobs // 10` requests and again at the end. Prints figures;
asserts nothing. Targets: worker RSS growth after warm-up <= 5 %, web RSS <= 150 MB.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from common import Stack, checkpoint, setup

TEXT = "A short sentence, again and again, to find out whether memory grows."


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    args = setup(
        __doc__,
        runs=1,
        extra=lambda parser: (
            parser.add_argument("--jobs", type=int, default=500),
            parser.add_argument("--clients", type=int, default=4),
        ),
    )
    import httpx

    model_dir = checkpoint(args.size)
    errors: list[str] = []
    with Stack(model_dir) as stack:
        headers = {"Authorization": f"Bearer {stack.key}"}
        counter = iter(range(10**9))
        lock = threading.Lock()

        def client(total: int) -> None:
            with httpx.Client(timeout=300) as http:
                while True:
                    with lock:
                        n = next(counter)
                    if n >= total:
                        return
                    body = {"input": TEXT, "seed": 100_000 + n, "response_format": "pcm"}
                    r = http.post(f"{stack.base_url}/v1/audio/speech", json=body, headers=headers)
                    if r.status_code != 200:
                        errors.append(f"{r.status_code} {r.text[:100]}")

        def run(total: int) -> float:
            started = time.perf_counter()
            threads = [threading.Thread(target=client, args=(total,)) for _ in range(args.clients)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return time.perf_counter() - started

        warm = max(1, args.jobs // 10)
        run(warm)
        stack.wait_idle()
        worker_before, web_before = rss_mb(stack.worker.popen.pid), rss_mb(stack.web.popen.pid)
        elapsed = run(warm + args.jobs)
        stack.wait_idle()
        worker_after, web_after = rss_mb(stack.worker.popen.pid), rss_mb(stack.web.popen.pid)
    growth = 100 * (worker_after - worker_before) / worker_before if worker_before else 0.0
    print(f"{args.jobs} jobs ({args.size} checkpoint, {args.clients} clients) in {elapsed:.0f} s, errors {len(errors)}")
    print(f"worker RSS after warm-up {worker_before:.0f} MB, at the end {worker_after:.0f} MB: {growth:+.1f} %")
    print(f"web RSS after warm-up {web_before:.0f} MB, at the end {web_after:.0f} MB")
    if errors:
        print("first errors:", errors[:3])
    print("targets: worker growth <= 5 %, web <= 150 MB")


if __name__ == "__main__":
    main()
