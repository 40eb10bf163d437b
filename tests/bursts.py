"""Concurrent bursts from several processes (not threads of one), released at the same instant."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent


def burst(method: str, url: str, key: str, bodies: list[dict | None], lead: float = 3.0) -> list[dict]:
    start = time.time() + lead  # time for every process to start and import httpx
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "burst_client.py"), method, url, key, json.dumps(b) if b else "", str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for b in bodies
    ]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    return results


def tally(results: list[dict]) -> Counter:
    return Counter((r["status"], r["code"]) for r in results)
