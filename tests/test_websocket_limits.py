"""Limits at WebSocket connect: a connection counts against the organization's rate limit, and an
organization holds at most TTS_WS_MAX_PER_ORG open connections (across web processes). A refused
connection gets an `error` message saying why, then close code 4429."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets
from django.conf import settings

from tests import stack
from tests.conftest import make_persona

pytestmark = pytest.mark.django_db(transaction=True)


async def opened(url: str, key: str):
    ws = await websockets.connect(url, additional_headers={"Authorization": f"Bearer {key}"}, open_timeout=30)
    first = json.loads(await asyncio.wait_for(ws.recv(), 30))
    return ws, first


async def refused(url: str, key: str) -> tuple[dict, int]:
    ws, first = await opened(url, key)
    with pytest.raises(websockets.ConnectionClosed) as closed:
        await asyncio.wait_for(ws.recv(), 30)
    return first, closed.value.rcvd.code


def test_an_organization_may_hold_only_its_cap_of_open_connections(tmp_path):
    crowd = make_persona("Capped Co", requests_per_minute=1000)
    web, base = stack.start_web(stack.stack_env(settings.REDIS_URL, TTS_WS_MAX_PER_ORG="2"), tmp_path)
    url = base.replace("http://", "ws://") + "/v1/audio/stream"
    other = make_persona("Other Co", requests_per_minute=1000)

    async def scenario():
        first, first_ready = await opened(url, crowd.key)
        second, second_ready = await opened(url, crowd.key)
        assert first_ready["type"] == second_ready["type"] == "ready"
        message, code = await refused(url, crowd.key)
        assert code == 4429
        assert message["type"] == "error" and message["code"] == "too_many_connections"
        stranger, ready = await opened(url, other.key)  # another organization is not affected
        assert ready["type"] == "ready"
        await first.close()
        await asyncio.sleep(0.5)  # the server handles the close
        third, ready = await opened(url, crowd.key)  # a freed slot is taken again
        assert ready["type"] == "ready"
        for ws in (second, stranger, third):
            await ws.close()

    try:
        asyncio.run(scenario())
    finally:
        web.stop()


def test_connection_attempts_count_against_the_rate_limit(live_stack):
    slow = make_persona("Slow Co", requests_per_minute=2)
    url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"

    async def scenario():
        for _ in range(2):
            ws, ready = await opened(url, slow.key)
            assert ready["type"] == "ready"
            await ws.close()
        message, code = await refused(url, slow.key)
        assert code == 4429 and message["code"] == "rate_limit_exceeded"

    asyncio.run(scenario())
