"""Per-organization request rate limits with django-ratelimit (fixed windows in the Redis cache),
at the plan's requests per minute. Every authenticated API response carries OpenAI's
`x-ratelimit-*-requests` headers; over the limit is 429 with Retry-After."""

from __future__ import annotations

from django.http import HttpRequest
from django_ratelimit.core import get_usage

from tts_saas.errors import ApiError

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


class RateLimitHeadersMiddleware:
    """Adds the rate-limit headers to every response whose request was counted."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        from asgiref.sync import iscoroutinefunction, markcoroutinefunction

        self.get_response = get_response
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self._async:
            return self.__acall__(request)
        return self._headers(request, self.get_response(request))

    async def __acall__(self, request):
        return self._headers(request, await self.get_response(request))

    @staticmethod
    def _headers(request, response):
        usage = getattr(request, "ratelimit_usage", None)
        if usage:
            response["x-ratelimit-limit-requests"] = str(usage["limit"])
            response["x-ratelimit-remaining-requests"] = str(max(0, usage["limit"] - usage["count"]))
            response["x-ratelimit-reset-requests"] = f"{usage['time_left']}s"
        return response
