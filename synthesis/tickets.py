"""Single-use, short-lived WebSocket tickets: browsers cannot set an Authorization header on a
WebSocket, and API keys must never travel in URLs. A ticket is bought over REST with the key and
spent once (GETDEL) within TICKET_SECONDS."""

from __future__ import annotations

import secrets

from accounts.models import ApiKey
from tts_saas.redis import get_async_redis, get_redis

TICKET_SECONDS = 60


def issue(api_key: ApiKey) -> str:
    ticket = "wst_" + secrets.token_urlsafe(24)
    get_redis().set(f"tts:wsticket:{ticket}", api_key.pk, ex=TICKET_SECONDS)
    return ticket


async def redeem(ticket: str) -> int | None:
    """The API key id the ticket was issued for, once; None if unknown, spent or expired."""
    if not ticket.startswith("wst_") or len(ticket) > 64:
        return None
    value = await get_async_redis().getdel(f"tts:wsticket:{ticket}")
    return int(value) if value is not None else None
