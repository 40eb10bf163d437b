"""Fault injection: SIGKILL the synthesis worker that runs a job, again and again, and measure
what the service does about it.

    .venv/bin/python bench/chaos.py --size tiny [--kills 20]

A private stack (Redis, SQLite, uvicorn, two synthesis workers, a light worker with beat). Each
round submits an asynchronous job (`POST /v1/jobs`), waits until a worker has started it, SIGKILLs
that worker and starts a replacement at once, then waits for the job's end. Prints the time from
the kill to the job running again on a live worker (p50, p95, max), how the jobs ended, and the
books afterwards: every job billed exactly once if it succeeded and not at all if it failed, no
reservation and no concurrency slot left behind. Random weights: the audio is noise.
"""

from __future__ import annotations

import signal
import sqlite3
import statistics
import time

from common import Stack, checkpoint, setup

TEXT = " ".join(f"This is sentence number {n} of a long announcement." for n in range(1, 19))


def moved_on(row, victim: str):
    """The job runs on another worker than `victim`, or has ended."""
    return row and ((row[0] == "running" and row[1] != victim) or row[0] not in ("queued", "running")) and row


def ended(row):
    return row and row[0] not in ("queued", "running") and row


def main() -> None:
    args = setup(__doc__, runs=1, extra=lambda p: p.add_argument("--kills", type=int, default=20))
    import httpx

    from tests.stack import start_worker, wait_for_workers

    with Stack(checkpoint(args.size), TTS_BENCH_FIXED_LENGTH="1", TTS_MAX_BATCH="2") as stack:
        db = sqlite3.connect(stack.tmp / "bench.sqlite3", isolation_level=None)
        schedule = str(stack.tmp / "beat-schedule")
        light = start_worker(stack.env, stack.tmp, "light", queue="default", extra=("--beat", "--schedule", schedule))
        workers = {stack.worker.popen.pid: stack.worker}
        started = 0

        def ensure_two() -> None:
            nonlocal started
            for pid, proc in list(workers.items()):
                if proc.popen.poll() is not None:
                    del workers[pid]
            while len(workers) < 2:
                started += 1
                proc = start_worker(stack.env, stack.tmp, f"chaos{started}")
                workers[proc.popen.pid] = proc

        def job_row(job_id: str):
            return db.execute(
                "SELECT status, worker, attempts FROM synthesis_job WHERE id = ?", (job_id.replace("-", ""),)
            ).fetchone()

        def wait_for(predicate, timeout: float):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                value = predicate()
                if value:
                    return value
                time.sleep(0.05)
            return None

        recoveries: list[float] = []
        outcomes: dict[str, int] = {}
        headers = {"Authorization": f"Bearer {stack.key}"}
        try:
            for round_ in range(args.kills):
                ensure_two()
                wait_for_workers(stack.redis, "ready", count=2, timeout=300)
                response = httpx.post(
                    f"{stack.base_url}/v1/jobs",
                    json={"input": TEXT, "voice": "nova", "response_format": "pcm", "seed": round_},
                    headers=headers,
                    timeout=30,
                )
                response.raise_for_status()
                job_id = response.json()["id"]
                row = wait_for(lambda job_id=job_id: (r := job_row(job_id)) and r[0] == "running" and r[1] and r, 60)
                if row is None:
                    print(f"round {round_}: the job never started")
                    continue
                victim = row[1]
                workers.pop(int(victim.split(":")[1])).stop(signal.SIGKILL)
                killed = time.monotonic()
                ensure_two()  # a replacement starts at once (it loads the model meanwhile)
                again = wait_for(lambda job_id=job_id, victim=victim: moved_on(job_row(job_id), victim), 120)
                if again and again[0] == "running":
                    recoveries.append(time.monotonic() - killed)
                final = wait_for(lambda job_id=job_id: ended(job_row(job_id)), 300)
                outcome = final[0] if final else "unfinished"
                outcomes[outcome] = outcomes.get(outcome, 0) + 1
                print(f"round {round_ + 1}: recovered in {recoveries[-1] if recoveries else 0:.1f} s, {outcome}")
        finally:
            light.stop()
            for proc in workers.values():
                proc.stop()

        billed = db.execute(
            "SELECT COALESCE(SUM(characters), 0) FROM synthesis_job WHERE status = 'succeeded'"
        ).fetchone()[0]
        used, reserved = db.execute(
            "SELECT COALESCE(SUM(used), 0), COALESCE(SUM(reserved), 0) FROM billing_quotaperiod"
        ).fetchone()
        rows_per_job = db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT job_id) FROM billing_usageevent WHERE job_id IS NOT NULL"
        ).fetchone()
        slots = sum(stack.redis.zcard(k) for k in stack.redis.scan_iter("tts:slots:*"))
        print(f"\nkills: {args.kills}, {args.size} checkpoint, two synthesis workers, a replacement started per kill")
        if recoveries:
            ordered = sorted(recoveries)
            p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
            print(
                f"kill -> running on a live worker: p50 {statistics.median(ordered):.1f} s, p95 {p95:.1f} s, "
                f"max {ordered[-1]:.1f} s (target <= 15 s)"
            )
        print(f"jobs: {outcomes}")
        print(
            f"books: billed {used} characters for {billed} characters of succeeded jobs, {reserved} still reserved, "
            f"ledger rows {rows_per_job[0]} for {rows_per_job[1]} jobs, concurrency slots held {slots}"
        )


if __name__ == "__main__":
    main()
