"""Logs are JSON lines with a zoned timestamp, and a job's worker lines carry the request id of
the API call that made the job (it travels in the task's headers)."""

from __future__ import annotations

import json

from tests.waiting import wait_until


def worker_lines(live_stack) -> list[dict]:
    lines = []
    for raw in live_stack.worker.output().splitlines():
        if raw.startswith("{"):
            try:
                lines.append(json.loads(raw))
            except ValueError:
                continue
    return lines


def test_the_workers_log_line_for_a_job_carries_the_callers_request_id(live_stack, owner):
    with live_stack.client(owner.key) as client:
        response = client.post("/audio/speech", json={"input": "Which request was this?", "response_format": "pcm"})
    assert response.status_code == 200, response.text
    request_id, job_id = response.headers["x-request-id"], response.headers["x-job-id"]

    # The audio can reach the client before the worker logs the job's end: wait for that line.
    def job_succeeded_line() -> dict | None:
        lines = [line for line in worker_lines(live_stack) if line.get("job_id") == job_id]
        return next((line for line in lines if line.get("msg") == "job succeeded"), None)

    done = wait_until(job_succeeded_line, 30, f"the worker logged no 'job succeeded' line for job {job_id}")
    assert done["request_id"] == request_id
    assert done["level"] == "INFO" and done["logger"] == "synthesis.worker.run"
    assert done["ts"].endswith("+00:00")  # ISO 8601 with its zone
    assert done["org_id"] == owner.org.pk and done["audio_seconds"] > 0
