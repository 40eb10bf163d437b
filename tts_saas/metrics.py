"""Prometheus metrics at /metrics: request rate, latency and errors per endpoint from this module;
the apps register collectors for their own figures (synthesis: cache hit rate, queue depth,
workers). Set METRICS_TOKEN to require `Authorization: Bearer <token>`."""

from __future__ import annotations

import hmac
import time

from django.conf import settings
from django.http import HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Histogram, generate_latest

from .middleware import ResponseMiddleware

REQUESTS = Counter("tts_http_requests_total", "API requests answered", ["endpoint", "status"])
LATENCY = Histogram(
    "tts_http_request_seconds",
    "Time to the response headers",
    ["endpoint"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


def endpoint_of(request) -> str:
    match = getattr(request, "resolver_match", None)
    return match.url_name if match and match.url_name else "other"


class MetricsMiddleware(ResponseMiddleware):
    """Counts every API response and times it to its headers (streamed bodies: to the first chunk)."""

    def process(self, request, response, started: float):
        if request.path.startswith(("/v1/", "/elevenlabs/")):
            endpoint = endpoint_of(request)
            REQUESTS.labels(endpoint, str(response.status_code)).inc()
            LATENCY.labels(endpoint).observe(time.perf_counter() - started)
        return response


def metrics_view(request) -> HttpResponse:
    token = settings.METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given, token):
            return HttpResponse("unauthorized\n", status=401, content_type="text/plain")
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
