"""Single-use, short-lived WebSocket tickets: browsers cannot set an Authorization header on a
WebSocket, and API keys must never travel in URLs. A ticket is bought over REST with an API key,
or from the dashboard by a signed-in member, and spent once (GETDEL) within TICKET_SECONDS."""

from __future__ import annotations

import json
import secrets

from tts_saas.redis import get_redis

TICKET_SECONDS = 60
PREFIX = "wst_"


def _key(ticket: str) -> str:
    return f"tts:wsticket:{ticket}"


def issue(
    *,
    api_key_id: int | None = None,
    secret: str = "",
    organization_id: int | None = None,
    user_id: int | None = None,
) -> str:
    """For an API key (`secret`: the hash of the secret that bought it, which the connection lives
    no longer than), or for a dashboard member acting in an organization."""
    ticket = PREFIX + secrets.token_urlsafe(24)
    holder = {"api_key": api_key_id, "secret": secret} if api_key_id else {}
    holder = holder or {"organization": organization_id, "user": user_id}
    get_redis().set(_key(ticket), json.dumps(holder), ex=TICKET_SECONDS)
    return ticket


def redeem(ticket: str) -> dict | None:
    """Who the ticket was issued to, once; None if unknown, spent or expired."""
    if not ticket.startswith(PREFIX) or len(ticket) > 64:
        return None
    value = get_redis().getdel(_key(ticket))
    return json.loads(value) if value is not None else None
