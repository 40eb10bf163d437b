"""Prometheus metrics at /metrics (the seed design's list: request rate, latency, errors, cache
hit rate, queue depth, workers). Per-process counters come from prometheus_client; figures that
live in Redis (cache, queues, workers) are read at scrape time, so every web replica reports the
same, current values. Set METRICS_TOKEN to require `Authorization: Bearer <token>`."""

from __future__ import annotations

import hmac
import time

from django.conf import settings
from django.http import HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from .middleware import ResponseMiddleware

REQUESTS = Counter("tts_http_requests_total", "API requests answered", ["endpoint", "status"])
LATENCY = Histogram(
    "tts_http_request_seconds",
    "Time to the response headers",
    ["endpoint"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


class RedisCollector:
    def describe(self):
        # Names only: registering must not touch Redis (management commands run without it).
        yield CounterMetricFamily("tts_cache_requests", "Audio cache lookups", labels=["result"])
        yield GaugeMetricFamily("tts_cache_bytes", "Bytes held by the audio cache")
        yield GaugeMetricFamily("tts_queue_depth", "Tasks waiting per Celery queue", labels=["queue"])
        yield GaugeMetricFamily("tts_workers", "Synthesis worker processes alive", labels=["status"])

    def collect(self):
        from synthesis import cache, workers
        from synthesis.operations import queue_depths

        stats = cache.stats()
        hits = CounterMetricFamily("tts_cache_requests", "Audio cache lookups", labels=["result"])
        hits.add_metric(["hit"], stats.get("hits", 0))
        hits.add_metric(["miss"], stats.get("misses", 0))
        yield hits
        yield GaugeMetricFamily("tts_cache_bytes", "Bytes held by the audio cache", value=stats["bytes"])
        depth = GaugeMetricFamily("tts_queue_depth", "Tasks waiting per Celery queue", labels=["queue"])
        for queue, waiting in queue_depths().items():
            depth.add_metric([queue], waiting)
        yield depth
        alive = GaugeMetricFamily("tts_workers", "Synthesis worker processes alive", labels=["status"])
        states = workers.live_workers()
        for status in ("ready", "unavailable"):
            alive.add_metric([status], sum(1 for w in states if w.status == status))
        yield alive


REGISTRY.register(RedisCollector())


def endpoint_of(request) -> str:
    match = getattr(request, "resolver_match", None)
    return match.url_name if match and match.url_name else "other"


class MetricsMiddleware(ResponseMiddleware):
    """Counts every API response and times it to its headers (streamed bodies: to the first chunk)."""

    def process(self, request, response, started: float):
        if request.path.startswith("/v1/"):
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
