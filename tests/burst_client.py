"""One client of a concurrent burst, run as its own process: waits for the common start time,
sends one request, prints what it got as one JSON line. Run by tests/bursts.py."""

from __future__ import annotations

import json
import sys
import time

import httpx


def main() -> None:
    method, url, key, body, start = sys.argv[1:6]
    client = httpx.Client(timeout=120)
    while time.time() < float(start):
        time.sleep(0.0005)
    sent = time.time()
    r = client.request(method, url, headers={"Authorization": f"Bearer {key}"}, json=json.loads(body) if body else None)
    code = r.json()["error"]["code"] if r.status_code >= 400 else ""
    print(
        json.dumps(
            {
                "status": r.status_code,
                "code": code,
                "seconds": time.time() - sent,
                "retry_after": r.headers.get("retry-after"),
                "remaining": r.headers.get("x-ratelimit-remaining-requests"),
            }
        )
    )


if __name__ == "__main__":
    main()
