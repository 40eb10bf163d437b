"""Per-organization request rate limits with django-ratelimit (fixed one-minute windows in the
Redis cache) at the plan's requests per minute. `count_request` takes the organization, not a
request, so REST views and WebSocket utterances count alike. API responses carry OpenAI's
`x-ratelimit-*-requests` headers; over the limit is 429 with Retry-After."""

from __future__ import annotations

from dataclasses import dataclass

from django_ratelimit.core import get_usage

from accounts.models import Organization
from tts_saas.errors import ApiError
from tts_saas.middleware import ResponseMiddleware

GROUP = "api"


@dataclass(frozen=True)
class CharacterUsage:
    """OpenAI's `-tokens` headers, counted here in characters of input over the month (the quota,
    with overage up to the spending limit), not tokens per minute."""

    limit: int
    remaining: int
    reset_seconds: int

    def headers(self) -> dict[str, str]:
        return {
            "x-ratelimit-limit-tokens": str(self.limit),
            "x-ratelimit-remaining-tokens": str(max(0, self.remaining)),
            "x-ratelimit-reset-tokens": f"{self.reset_seconds}s",
        }


@dataclass(frozen=True)
class RateUsage:
    limit: int
    count: int
    time_left: int  # seconds to the next window
    characters: CharacterUsage | None = None

    def headers(self) -> dict[str, str]:
        return {
            "x-ratelimit-limit-requests": str(self.limit),
            "x-ratelimit-remaining-requests": str(max(0, self.limit - self.count)),
            "x-ratelimit-reset-requests": f"{self.time_left}s",
            **(self.characters.headers() if self.characters else {}),
        }


def count_request(organization: Organization, requests_per_minute: int, key=None) -> RateUsage:
    """Count one request against the organization's window, and the key's own when it has a
    limit; ApiError(429) when over either. Synchronous (django-ratelimit is): async callers run it
    in a thread. The headers report the window that is nearer its end."""
    own = None
    if key is not None and key.requests_per_minute is not None:
        own = _count(f"key:{key.pk}", key.requests_per_minute, "this API key")
    rate = _count(f"org:{organization.pk}", requests_per_minute, "your organization")
    return own if own is not None and own.limit - own.count < rate.limit - rate.count else rate


def _count(counter: str, requests_per_minute: int, whose: str) -> RateUsage:
    usage = get_usage(
        None,  # the counter is keyed by organization (or key) alone: no request is looked at
        group=GROUP,
        key=lambda group, request: counter,
        rate=f"{requests_per_minute}/m",
        increment=True,
    )
    rate = RateUsage(limit=usage["limit"], count=usage["count"], time_left=usage["time_left"])
    if usage["should_limit"]:
        raise ApiError(
            429,
            f"Rate limit reached: {rate.limit} requests per minute for {whose}. Retry in {rate.time_left} s.",
            "rate_limit_exceeded",
            headers={**rate.headers(), "Retry-After": str(max(1, rate.time_left))},
        )
    return rate


class RateLimitHeadersMiddleware(ResponseMiddleware):
    """Adds the rate-limit headers to every response whose request was counted."""

    def process(self, request, response, started: float):
        rate = getattr(request, "rate_usage", None)
        if rate is not None:
            for name, value in rate.headers().items():
                response[name] = value
        return response
