"""One tenant's failing webhooks against another tenant's job callback, through a private stack
(Redis, uvicorn, a Kokoro worker on the tiny checkpoint, the light worker with 2 threads as
deployed). Tenant A keeps its plan's limit of endpoints (10), every one a receiver that accepts the
connection and never answers (each attempt waits its full 10 s), and floods them: `--jobs` short
jobs, each making a `job.succeeded` delivery per endpoint. Then tenant B's job, with a callback to a
receiver that answers at once: printed, the seconds from B's job ending to its callback arriving,
with the share of the delivery work per organization (TTS_WEBHOOK_ORG_SLOTS=1) and without it (0).

    .venv/bin/python bench/webhook_fairness.py [--jobs 10] [--wait 90]
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from datetime import datetime

from common import ROOT, Stack, checkpoint, setup


class BlackHole:
    """Accepts connections and never answers them."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(512)
        self.held: list[socket.socket] = []
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                return


def run(slots: int, jobs: int, wait: float) -> tuple[float | None, int]:
    import httpx

    from tests.receiver import Receiver
    from tests.stack import start_worker

    hole, receiver = BlackHole(), Receiver(failures=0)
    env = {"TTS_CALLBACK_ALLOW_PRIVATE": "1", "TTS_WEBHOOK_ORG_SLOTS": str(slots)}
    with Stack(checkpoint("tiny", "kokoro"), engine="kokoro", **env) as stack:
        light = start_worker(stack.env, stack.tmp, "light", queue="default", extra=("--concurrency", "2"))
        try:
            other = subprocess.check_output(
                [sys.executable, "manage.py", "create_org", "Other", "--quiet"], cwd=ROOT, env=stack.env, text=True
            ).strip()
            base = f"{stack.base_url}/v1"
            a, b = ({"Authorization": f"Bearer {k}"} for k in (stack.key, other))
            with httpx.Client(timeout=60) as http:
                for i in range(10):
                    made = http.post(
                        f"{base}/webhooks/endpoints",
                        json={"url": f"{hole.url}/hook{i}", "events": ["job.succeeded"]},
                        headers=a,
                    )
                    assert made.status_code == 201, made.text
                flood = [
                    http.post(
                        f"{base}/jobs", json={"model": "kokoro", "voice": "af_heart", "input": f"Flood {i}."}, headers=a
                    )
                    for i in range(jobs)
                ]
                assert all(r.status_code == 202 for r in flood), [r.text for r in flood]
                for r in flood:  # every flood job ended: its deliveries are queued
                    wait_job(http, base, r.json()["id"], a)
                time.sleep(2)  # the light worker is now busy with tenant A's attempts
                job = http.post(
                    f"{base}/jobs",
                    json={"model": "kokoro", "voice": "af_heart", "input": "Mine.", "callback_url": receiver.url},
                    headers=b,
                ).json()
                done = wait_job(http, base, job["id"], b)
                ended = datetime.fromisoformat(done["finished_at"].replace("Z", "+00:00")).timestamp()
                deadline = time.time() + wait
                while not receiver.deliveries and time.time() < deadline:
                    time.sleep(0.05)
                arrived = time.time() if receiver.deliveries else None
            return (arrived - ended if arrived else None), len(hole.held)
        finally:
            light.stop()
            receiver.close()


def wait_job(http, base: str, job_id: str, headers: dict) -> dict:
    for _ in range(600):
        job = http.get(f"{base}/jobs/{job_id}", headers=headers).json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.2)
    raise TimeoutError(job_id)


def main() -> None:
    def extra(parser):
        parser.add_argument("--jobs", type=int, default=10, help="tenant A's jobs: 10 deliveries each")
        parser.add_argument("--wait", type=float, default=90, help="seconds to wait for B's callback")

    args = setup(__doc__, runs=1, extra=extra)
    rows = []
    for slots in (1, 0):
        delay, held = run(slots, args.jobs, args.wait)
        said = f"{delay:.2f} s" if delay is not None else f"not within {args.wait:.0f} s"
        print(
            f"TTS_WEBHOOK_ORG_SLOTS={slots}: B's callback {said} after its job ended; {held} of A's attempts open",
            flush=True,
        )
        rows.append((slots, said, held))
    print("\n| share (TTS_WEBHOOK_ORG_SLOTS) | B's callback after its job ended | A's attempts open by then |")
    print("|---|---|---|")
    for slots, said, held in rows:
        print(f"| {slots or 'none (0)'} | {said} | {held} |")


if __name__ == "__main__":
    main()
