"""A WebSocket connection's outgoing frames, bounded in bytes: a client that does not read fast
enough is closed (4008) rather than allowed to grow the server's memory."""

from __future__ import annotations

import asyncio


class SlowClient(Exception):
    """The client let more than the outbox's limit of frames pile up."""


class Outbox:
    def __init__(self, limit: int):
        self.limit = limit
        self.queued = 0
        self.queue: asyncio.Queue[str | bytes] = asyncio.Queue()

    def put(self, frame: str | bytes) -> None:
        size = len(frame)
        if self.queued + size > self.limit:
            raise SlowClient
        self.queued += size
        self.queue.put_nowait(frame)

    async def get(self) -> str | bytes:
        frame = await self.queue.get()
        self.queued -= len(frame)
        return frame
