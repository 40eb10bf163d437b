"""Prometheus figures that live in Redis (audio cache, queues, workers), read at scrape time so
every web replica reports the same, current values. Registered when the app is ready."""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from . import cache, workers
from .operations import queue_depths


class SynthesisCollector:
    def describe(self):
        # Names only: registering must not touch Redis (management commands run without it).
        yield CounterMetricFamily("tts_cache_requests", "Audio cache lookups", labels=["result"])
        yield GaugeMetricFamily("tts_cache_bytes", "Bytes held by the audio cache")
        yield GaugeMetricFamily("tts_queue_depth", "Tasks waiting per Celery queue", labels=["queue"])
        yield GaugeMetricFamily("tts_workers", "Synthesis worker processes alive", labels=["status"])

    def collect(self):
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
