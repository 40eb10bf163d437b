"""Held load on one web process: 200 WebSocket connections synthesising at once all get their
audio and a clean end — none dropped without a close frame, none left without an answer — and
the web process's memory stays bounded."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets

from synthesis.models import Job
from tests.conftest import make_persona

pytestmark = pytest.mark.django_db(transaction=True)


def rss(pid: int) -> int:
    """Resident memory of a process, in bytes (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


CONNECTIONS = 200  # TTS_WS_MAX_PER_ORG's default: one organization at its cap
WEB_RSS_GROWTH_BYTES = 120 * 1024 * 1024


def test_many_connections_speaking_at_once_all_get_their_audio(live_stack):
    org = make_persona("Crowd Co", concurrent_jobs=200, requests_per_minute=10_000)
    url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
    headers = {"Authorization": f"Bearer {org.key}"}
    message = json.dumps({"type": "synthesize", "id": "u1", "text": "Welcome, everybody, all at once.", "seed": 5})

    async def one() -> tuple[str, int]:
        async with websockets.connect(url, additional_headers=headers, open_timeout=60) as ws:
            await asyncio.wait_for(ws.recv(), 60)  # ready
            await ws.send(message)
            audio = 0
            while True:
                frame = await asyncio.wait_for(ws.recv(), 90)
                if isinstance(frame, bytes):
                    audio += len(frame)
                    continue
                reply = json.loads(frame)
                if reply["type"] in ("end", "error"):
                    return reply.get("code", reply["type"]), audio

    async def crowd():
        return await asyncio.gather(*(one() for _ in range(CONNECTIONS)), return_exceptions=True)

    before = rss(live_stack.web.popen.pid)
    results = asyncio.run(crowd())
    grown = rss(live_stack.web.popen.pid) - before
    print(f"web RSS {before / 2**20:.0f} MiB, +{grown / 2**20:.0f} MiB after {CONNECTIONS} connections")
    assert grown < WEB_RSS_GROWTH_BYTES
    failures = [r for r in results if isinstance(r, BaseException) or r[0] != "end"]
    assert not failures, failures[:5]
    assert all(audio > 0 for _, audio in results)
    assert len({audio for _, audio in results}) == 1  # the same audio for everyone
    assert Job.objects.filter(organization=org.org).count() == 1  # one generation, shared
