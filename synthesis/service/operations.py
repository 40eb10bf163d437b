"""Figures for the operators' page, read from the real system: Redis (queues, workers, cache,
open WebSockets) and the database (jobs and the usage ledger over the last hour)."""

from __future__ import annotations

import time
from datetime import timedelta

from django.db.models import Count, Q
from django.utils import timezone

from billing import offer
from billing.models import UsageEvent
from synthesis.audio import cache
from synthesis.models import Job
from synthesis.service import capacity, workers
from tts_saas.redis import get_redis

WS_CONNECTIONS = "tts:ws:connections"  # sorted set: connection id -> opened at


def queue_depths() -> dict[str, int]:
    """Celery's messages waiting per queue: each served engine's, then `default`."""
    r = get_redis()
    depths = {}
    for queue in [spec.queue_name for spec in offer.served()] + ["default"]:
        names = [queue.encode(), *r.scan_iter(f"{queue}\x06\x16*")]
        depths[queue] = sum(r.llen(n) for n in names if r.type(n) == b"list")
    return depths


def percentile(values: list[int], q: float) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def snapshot() -> dict:
    now = timezone.now()
    hour_ago = now - timedelta(hours=1)
    jobs = Job.objects.filter(created_at__gte=hour_ago)
    by_status = dict(jobs.values_list("status").annotate(n=Count("id")))
    events = UsageEvent.objects.filter(created_at__gte=hour_ago)
    latencies = list(events.filter(status="succeeded").values_list("latency_ms", flat=True)[:50_000])
    totals = events.aggregate(all=Count("id"), failed=Count("id", filter=Q(status="failed")))
    stats = cache.stats()
    live = workers.live_workers()
    lookups = stats.get("hits", 0) + stats.get("misses", 0)
    return {
        "queues": queue_depths(),
        "workers": live,
        "engines": engine_queues(live),
        "jobs_last_hour": sum(by_status.values()),
        "jobs_per_minute": round(sum(by_status.values()) / 60, 2),
        "jobs_by_status": by_status,
        "running": Job.objects.filter(status=Job.Status.RUNNING).count(),
        "latency_p50_ms": percentile(latencies, 0.50),
        "latency_p95_ms": percentile(latencies, 0.95),
        "error_rate": round(100 * totals["failed"] / totals["all"], 1) if totals["all"] else None,
        "requests_last_hour": totals["all"],
        "cache_hit_rate": round(100 * stats.get("hits", 0) / lookups, 1) if lookups else None,
        "cache_bytes": stats["bytes"],
        "websockets": get_redis().zcount(WS_CONNECTIONS, time.time() - 86400, "+inf"),
    }


def engine_queues(live: list[workers.WorkerState]) -> list[dict]:
    """Each served engine's queue: jobs waiting, its ready workers' capacity, the estimated wait."""
    out = []
    for spec in offer.served():
        queue = capacity.queue_state(spec.name, [w for w in live if w.engine == spec.name])
        out.append({"name": spec.name, "title": spec.title, "queue": queue, "estimated_wait": queue.estimated_wait()})
    return out
