"""Per-organization request rate limits with django-ratelimit (fixed windows in the Redis cache),
at the plan's requests per minute. Every authenticated API response carries OpenAI's
`x-ratelimit-*-requests` headers; over the limit is 429 with Retry-After."""

from __future__ import annotations

from django.http import HttpRequest
from django_ratelimit.core import get_usage

from tts_saas.errors import ApiError
from tts_saas.middleware import ResponseMiddleware

GROUP = "api"


def enforce(request: HttpRequest, org_id: int, requests_per_minute: int) -> dict:
    """Count this request against its organization's window; raise ApiError(429) when over.
    django-ratelimit is synchronous: async views call this through sync_to_async."""
    usage = get_usage(
        request, group=GROUP, key=lambda group, req: f"org:{org_id}", rate=f"{requests_per_minute}/m", increment=True
    )
    request.ratelimit_usage = usage
    if usage["should_limit"]:
        raise ApiError(
            429,
            f"Rate limit reached: {usage['limit']} requests per minute for your organization. "
            f"Retry in {usage['time_left']} s.",
            "rate_limit_exceeded",
            headers={"Retry-After": str(max(1, usage["time_left"]))},
        )
    return usage


class RateLimitHeadersMiddleware(ResponseMiddleware):
    """Adds the rate-limit headers to every response whose request was counted."""

    def process(self, request, response, started: float):
        usage = getattr(request, "ratelimit_usage", None)
        if usage:
            response["x-ratelimit-limit-requests"] = str(usage["limit"])
            response["x-ratelimit-remaining-requests"] = str(max(0, usage["limit"] - usage["count"]))
            response["x-ratelimit-reset-requests"] = f"{usage['time_left']}s"
        return response
