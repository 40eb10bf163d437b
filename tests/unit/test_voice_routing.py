"""Speaker-sharded routing without a server: rendezvous order (stable, only a leaving or joining
worker's share moves), owners with bounded loads (a few voices spread evenly, each kept by its
owner while it lives), the queue a job is sent to (its voice's owner's, or the shared one when the
voice keeps nothing, routing is off, no worker takes routed jobs or the owner is the busier), and a
gone worker's routed jobs sent to the shared queue."""

from __future__ import annotations

import json
import time

import pytest

from inference.voxcpm.references import affinity, digest
from synthesis.service import capacity, routing, workers
from synthesis.service.workers import WorkerState
from tests import stack


def worker(name: str, status: str = "ready", queue: str | None = None, capacity: int = 4) -> WorkerState:
    return WorkerState(name, status, "v", "", capacity, "voxcpm", f"tts-voxcpm.{name}" if queue is None else queue)


KEYS = [digest(f"voice {i}") for i in range(300)]


def owners(states) -> dict[str, str]:
    return {key: routing.owner(key, states).name for key in KEYS}


def test_each_voice_has_one_owner_and_voices_spread_over_the_workers():
    states = [worker("a"), worker("b"), worker("c")]
    placed = owners(states)
    assert placed == owners(list(reversed(states)))  # the order workers are listed in does not matter
    shares = {name: sum(1 for o in placed.values() if o == name) for name in "abc"}
    assert all(70 <= n <= 130 for n in shares.values()), shares


def test_a_worker_leaving_or_joining_moves_only_its_share():
    three = owners([worker("a"), worker("b"), worker("c")])
    two = owners([worker("a"), worker("b")])
    assert all(two[k] == three[k] for k in KEYS if three[k] != "c")  # only c's voices moved
    four = owners([worker("a"), worker("b"), worker("c"), worker("d")])
    assert all(four[k] in (three[k], "d") for k in KEYS)  # voices move only to the newcomer
    assert 40 <= sum(1 for k in KEYS if four[k] == "d") <= 110


def test_only_ready_workers_with_a_queue_of_their_own_own_voices():
    states = [worker("a", status="draining"), worker("b", status="unavailable"), worker("c", queue="")]
    assert routing.owner(KEYS[0], states) is None
    assert routing.owner(KEYS[0], states + [worker("d")]).name == "d"


def give(keys, states, owners: dict[str, str]) -> dict[str, str]:
    """Voices routed one after another, each kept by the owner it is given (as `queue_for` keeps them)."""
    for key in keys:
        owners[key] = routing.owner(key, states, owners).name
    return owners


def test_a_few_voices_spread_evenly_by_capacity_and_keep_their_owner():
    two = [worker("a"), worker("b")]
    for first in range(0, 60, 6):  # whatever six voices come, three each
        owners = give(KEYS[first : first + 6], two, {})
        assert sorted(list(owners.values()).count(n) for n in "ab") == [3, 3], owners
    big = [worker("a", capacity=8), worker("b", capacity=4)]
    owners = give(KEYS[:12], big, {})
    assert list(owners.values()).count("a") == 8  # twice the capacity, twice the voices
    assert all(routing.owner(k, two, owners).name == owners[k] for k in KEYS[:12])  # kept, whatever the order


def test_a_gone_owners_voices_move_to_the_others_and_a_newcomer_takes_new_voices_only():
    three = [worker("a"), worker("b"), worker("c")]
    owners = give(KEYS[:30], three, {})
    two = [worker("a"), worker("b")]
    moved = {k: routing.owner(k, two, owners).name for k in KEYS[:30]}
    assert all(moved[k] == owners[k] for k in KEYS[:30] if owners[k] != "c")  # only c's voices move
    four = three + [worker("d")]
    assert all(routing.owner(k, four, owners).name == owners[k] for k in KEYS[:30])  # d takes none of them
    fresh = give(KEYS[30:60], four, dict(owners))
    assert sum(1 for k in KEYS[30:60] if fresh[k] == "d") >= 10  # but new ones, up to its share


def test_a_clones_key_is_its_references_digest_and_a_design_has_none():
    assert affinity({"reference": "abc", "design": "x"}) == digest("abc") == affinity({"reference": "abc"})
    assert affinity({"reference": "", "design": "A calm voice"}) == "" and affinity({}) == ""


@pytest.fixture
def registry(monkeypatch):
    """A Redis database of its own, with two VoxCPM2 workers that take routed jobs."""
    _, client = stack.redis_db(13)
    client.flushdb()
    for module in (workers, routing, capacity):
        monkeypatch.setattr(module, "get_redis", lambda: client)
    now = time.time()
    for name in ("host:1", "host:2"):
        info = {"engine": "voxcpm", "status": "ready", "model_version": "v", "error": "", "capacity": 2}
        client.zadd(workers.REGISTRY, {name: now + 30})
        client.hset(workers.INFO, name, json.dumps(info | {"queue": routing.own_queue("voxcpm", name)}))
    yield client
    client.flushdb()


def test_a_clones_job_goes_to_its_owners_queue_and_a_designs_to_the_shared_one(registry, settings):
    settings.TTS_VOICE_ROUTING = True
    clone = {"reference": "packed patches", "design": ""}
    chosen = routing.queue_for("voxcpm", clone)
    owner = routing.owner(digest("packed patches"), workers.live_workers("voxcpm"))
    assert chosen == owner.queue and chosen.startswith("tts-voxcpm.")
    assert registry.hget(routing.OWNERS.format("voxcpm"), digest("packed patches")).decode() == owner.name
    assert routing.queue_for("voxcpm", {"reference": "", "design": "calm"}) == "tts-voxcpm"
    assert routing.queue_for("kokoro", {"voice": [["af_heart", 1.0]]}) == "tts-kokoro"  # keeps nothing per voice
    settings.TTS_VOICE_ROUTING = False
    assert routing.queue_for("voxcpm", clone) == "tts-voxcpm"


def test_an_ssml_voice_span_with_a_clone_routes_the_job_to_that_clones_owner(registry, settings):
    settings.TTS_VOICE_ROUTING = True
    design = {"reference": "", "design": "calm"}
    styles = [{"pause_ms": 300}, {"voice": "my-clone", "params": {"reference": "clone patches", "design": ""}}]
    owner = routing.owner(digest("clone patches"), workers.live_workers("voxcpm"))
    assert routing.queue_for("voxcpm", design, styles) == owner.queue  # the span's clone: its prompt is kept there
    assert routing.queue_for("voxcpm", design, [{"pause_ms": 300}]) == "tts-voxcpm"  # no span with a clone
    own = {"reference": "own patches", "design": ""}
    assert routing.affinity_key("voxcpm", own, styles) == digest("own patches")  # the request's own voice first


def test_a_busier_owner_sends_the_job_to_the_shared_queue(registry, settings):
    settings.TTS_VOICE_ROUTING = True
    clone = {"reference": "packed patches"}
    owner = routing.queue_for("voxcpm", clone)
    for i in range(2):  # a batch's worth (capacity 2) waits for the owner, and nothing else waits
        routing.note_routed(f"job-{i}", owner, "voxcpm", time.time())
        capacity.note_waiting("voxcpm", f"job-{i}")
    assert routing.queue_for("voxcpm", clone) == "tts-voxcpm"
    for i in range(6):  # the engine's other jobs wait too: the owner is no busier than the average
        capacity.note_waiting("voxcpm", f"other-{i}")
    assert routing.queue_for("voxcpm", clone) == owner
    routing.note_claimed("job-0")
    assert registry.zcard(routing.ROUTED.format(owner)) == 1 and registry.hget(routing.ROUTED_JOBS, "job-0") is None


def test_a_gone_workers_routed_jobs_are_sent_to_the_shared_queue(registry, monkeypatch):
    deleted: list[str] = []
    monkeypatch.setattr(routing, "delete_queue", deleted.append)
    queue_1, queue_2 = (routing.own_queue("voxcpm", n) for n in ("host:1", "host:2"))
    routing.note_routed("job-a", queue_1, "voxcpm", time.time())
    routing.note_routed("job-b", queue_2, "voxcpm", time.time())
    resent: list[tuple[str, str]] = []
    assert routing.rescue_routed(lambda job, engine: resent.append((job, engine)) or True) == 0  # both alive
    registry.zadd(workers.REGISTRY, {"host:2": time.time() - 1})  # host:2 stopped beating
    assert routing.rescue_routed(lambda job, engine: resent.append((job, engine)) or True) == 1
    assert resent == [("job-b", "voxcpm")] and deleted == [queue_2]
    assert registry.zcard(routing.ROUTED.format(queue_2)) == 0 and registry.hget(routing.ROUTED_JOBS, "job-b") is None
    assert registry.zcard(routing.ROUTED.format(queue_1)) == 1  # the live worker's job stays where it is
    assert routing.rescue_routed(lambda job, engine: True) == 0  # once
