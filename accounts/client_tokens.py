"""Short-lived client tokens (`POST /v1/tokens`): what a server mints for a browser or a phone, so
that its API key never leaves the server. A token speaks and does nothing else (REST speech, the
WebSocket), for a few minutes (at most an hour) or once (one REST request or one WebSocket
connection), optionally in one voice only and within a character budget of input in all (every
request and utterance it makes takes from it); it acts as the key that minted it (billed to it,
refused once it is revoked or expired, and once the secret that minted it ends: a rotation's grace
over). Kept in Redis only, by the SHA-256 of the token: it expires there with its lifetime."""

from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import dataclass

from tts_saas.errors import ApiError
from tts_saas.redis import get_redis

PREFIX = "tts_tok_"
DEFAULT_SECONDS = 300
MAX_SECONDS = 3600

# Spend characters from the budget only if enough is left: one atomic step for concurrent requests.
_SPEND = """
local left = tonumber(redis.call('HGET', KEYS[1], 'left'))
if left == nil then return -1 end
local n = tonumber(ARGV[1])
if left < n then return -2 end
return redis.call('HINCRBY', KEYS[1], 'left', -n)
"""
# A token's terms in one step, a single-use one marked used as it is read: two requests racing with
# it cannot both win. Its row stays until it expires: it holds what is left of the budget.
_TAKE = """
if redis.call('HGET', KEYS[1], 'single_use') == '1' then
  if redis.call('HSETNX', KEYS[1], 'used', '1') == 0 then return {} end
end
return redis.call('HGETALL', KEYS[1])
"""


@dataclass(frozen=True)
class ClientToken:
    id: str  # the token's hash: never the token itself
    api_key_id: int
    expires_at: float  # unix seconds
    single_use: bool = False
    voice: str | None = None
    max_characters: int | None = None
    secret: str = ""  # the hash of the key's secret that minted it: the token ends when it does

    @property
    def expired(self) -> bool:
        return time.time() >= self.expires_at


class BudgetExceeded(Exception):
    def __init__(self, left: int):
        super().__init__(left)
        self.left = left


def _redis_key(token_id: str) -> str:
    return f"tts:ctoken:{token_id}"


def _id(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def mint(
    api_key_id: int,
    seconds: int = DEFAULT_SECONDS,
    single_use: bool = False,
    voice: str | None = None,
    max_characters: int | None = None,
    secret: str = "",
) -> tuple[str, ClientToken]:
    raw = PREFIX + secrets.token_urlsafe(32)
    token = ClientToken(_id(raw), api_key_id, time.time() + seconds, single_use, voice, max_characters, secret)
    fields: dict = {
        "api_key": api_key_id,
        "secret": secret,
        "expires_at": token.expires_at,
        "single_use": int(single_use),
        "voice": voice or "",
    }
    if max_characters is not None:
        fields["max_characters"] = fields["left"] = max_characters
    pipe = get_redis().pipeline()
    pipe.hset(_redis_key(token.id), mapping=fields)
    pipe.expire(_redis_key(token.id), seconds)
    pipe.execute()
    return raw, token


def _take(token_id: str) -> dict[str, str]:
    flat = get_redis().eval(_TAKE, 1, _redis_key(token_id))
    return {_text(flat[i]): _text(flat[i + 1]) for i in range(0, len(flat), 2)}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def redeem(raw: str) -> ClientToken | None:
    """The token's terms (a single-use one is spent now); None if unknown, spent or expired."""
    if not raw.startswith(PREFIX) or len(raw) > 80:
        return None
    token_id = _id(raw)
    fields = _take(token_id)
    if not fields:
        return None
    token = ClientToken(
        id=token_id,
        api_key_id=int(fields["api_key"]),
        expires_at=float(fields["expires_at"]),
        single_use=fields["single_use"] == "1",
        voice=fields["voice"] or None,
        max_characters=int(fields["max_characters"]) if "max_characters" in fields else None,
        secret=fields.get("secret", ""),
    )
    return None if token.expired else token


def spend(token: ClientToken, characters: int) -> None:
    """Take `characters` from the token's budget; BudgetExceeded (with what is left) when it cannot."""
    if token.max_characters is None:
        return
    left = int(get_redis().eval(_SPEND, 1, _redis_key(token.id), characters))
    if left == -1:
        raise BudgetExceeded(0)  # expired meanwhile
    if left == -2:
        raise BudgetExceeded(int(get_redis().hget(_redis_key(token.id), "left") or 0))


def check_terms(token: ClientToken, voice: str, characters: int) -> None:
    """A request made with `token`: its voice, then its characters from the budget; ApiError (403)
    says which term refuses it."""
    if token.voice is not None and voice.lower() != token.voice.lower():
        raise ApiError(
            403, f"This client token speaks only with the voice '{token.voice}'.", "voice_not_allowed", "voice"
        )
    try:
        spend(token, characters)
    except BudgetExceeded as exc:
        left = "none left" if exc.left == 0 else f"{exc.left} left"
        raise ApiError(
            403,
            f"This request needs {characters} characters; this client token has {left} of its budget of "
            f"{token.max_characters}.",
            "token_budget_exceeded",
            "input",
        ) from None
