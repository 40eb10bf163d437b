"""The worker registry in Redis: live registrations are listed, crashed processes' are dropped."""

from __future__ import annotations

import json
import time

from synthesis.service import workers
from tests import stack


def test_registrations_of_dead_processes_are_forgotten_and_live_ones_kept(monkeypatch, settings):
    _, redis_client = stack.redis_db(14)  # a database of its own: live workers register in the main one
    monkeypatch.setattr(workers, "get_redis", lambda: redis_client)
    info = json.dumps({"engine": "kokoro", "status": "ready", "model_version": "v", "error": "", "capacity": 4})
    now = time.time()
    redis_client.zadd(workers.REGISTRY, {"host:1": now + 30, "host:2": now - settings.TTS_WORKER_HEARTBEAT_TTL - 5})
    redis_client.hset(workers.INFO, mapping={"host:1": info, "host:2": info})
    assert [w.name for w in workers.live_workers()] == ["host:1"]
    assert workers.live_workers()[0].capacity == 4
    assert [w.name for w in workers.live_workers("kokoro")] == ["host:1"] and workers.live_workers("chattts") == []
    assert workers.forget_dead_workers() == 1
    assert redis_client.zrange(workers.REGISTRY, 0, -1) == [b"host:1"]
    assert redis_client.hkeys(workers.INFO) == [b"host:1"]
    assert workers.forget_dead_workers() == 0


def test_lapsed_registrations_are_told_apart_from_live_and_missing_ones(monkeypatch, settings):
    """Jobs are taken from lapsed workers only: a worker missing from the registry (Redis was
    restarted and it has not beaten since) is alive, and its jobs stay where they are."""
    _, redis_client = stack.redis_db(14)
    monkeypatch.setattr(workers, "get_redis", lambda: redis_client)
    now = time.time()
    redis_client.zadd(workers.REGISTRY, {"host:live": now + 5, "host:lapsed": now - 1})
    assert workers.lapsed_workers() == {"host:lapsed"}
    redis_client.flushdb()  # a Redis restart
    assert workers.lapsed_workers() == set()
