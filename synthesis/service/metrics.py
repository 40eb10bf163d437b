"""Prometheus figures that live in Redis (audio cache, queue, workers), read at scrape time so
every web replica reports the same, current values. Registered when the app is ready."""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from synthesis.audio import cache
from synthesis.service import workers
from synthesis.service.operations import engine_queues, queue_depths

QUEUE_GAUGES = {
    "tts_jobs_waiting": "Jobs waiting for a synthesis worker",
    "tts_worker_capacity": "Jobs the ready workers generate at once",
    "tts_job_service_seconds": "Measured time of one job on a worker",
    "tts_service_rate_jobs": "Jobs per second the ready workers finish when busy",
    "tts_estimated_wait_seconds": "Estimated wait of a new request to start",
}


class SynthesisCollector:
    def describe(self):
        # Names only: registering must not touch Redis (management commands run without it).
        yield CounterMetricFamily("tts_cache_requests", "Audio cache lookups", labels=["result"])
        yield GaugeMetricFamily("tts_cache_bytes", "Bytes held by the audio cache")
        yield GaugeMetricFamily("tts_queue_depth", "Tasks waiting per Celery queue", labels=["queue"])
        yield GaugeMetricFamily("tts_workers", "Synthesis worker processes alive", labels=["status", "engine"])
        for name, text in QUEUE_GAUGES.items():
            yield GaugeMetricFamily(name, text, labels=["engine"])

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
        alive = GaugeMetricFamily("tts_workers", "Synthesis worker processes alive", labels=["status", "engine"])
        states = workers.live_workers()
        for engine in engine_queues(states):
            for status in ("ready", "unavailable"):
                n = sum(1 for w in states if w.status == status and w.engine == engine["name"])
                alive.add_metric([status, engine["name"]], n)
        yield alive
        gauges = {name: GaugeMetricFamily(name, text, labels=["engine"]) for name, text in QUEUE_GAUGES.items()}
        for engine in engine_queues(states):
            queue = engine["queue"]
            values = {
                "tts_jobs_waiting": queue.waiting,
                "tts_worker_capacity": queue.capacity,
                "tts_job_service_seconds": queue.job_seconds,
                "tts_service_rate_jobs": queue.service_rate,
                "tts_estimated_wait_seconds": engine["estimated_wait"],
            }
            for name, value in values.items():
                if value is not None:  # nothing measured yet: no sample rather than a made-up one
                    gauges[name].add_metric([engine["name"]], value)
        yield from gauges.values()
