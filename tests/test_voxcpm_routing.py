"""Speaker-sharded routing on a live stack: two VoxCPM2 workers (tiny random checkpoint), each
consuming its own queue beside the engine's, a light worker with beat, the web. A cloned voice's
jobs all run on the worker that owns it (rendezvous over the live workers), which builds its prompt
once; a job routed to a worker that is then killed goes to the other one through the shared queue."""

from __future__ import annotations

import json
import os
import signal
import time

import httpx
import pytest

from inference.voxcpm.references import affinity
from synthesis.models import Job
from synthesis.service import routing
from synthesis.service.workers import WorkerState
from tests import stack
from tests.test_custom_voices import recording
from tests.waiting import wait_until
from voices.models import Voice

pytestmark = pytest.mark.django_db(transaction=True)


class Cluster:
    def __init__(self, tmp):
        url, self.redis = stack.redis_db(5)
        self.tmp = tmp
        self.env = stack.stack_env(
            url,
            TTS_ENGINES="voxcpm",
            TTS_VOXCPM_MODEL_DIR=os.environ["TTS_TEST_VOXCPM_CHECKPOINT"],
            TTS_MAX_BATCH="2",
        )
        self.light = stack.start_worker(
            self.env, tmp, "light", queue="default", extra=("--beat", "--schedule", str(tmp / "beat-schedule"))
        )
        self.web, self.base_url = stack.start_web(self.env, tmp)
        self.workers: dict[str, stack.Proc] = {}  # registry name -> process
        self.ports: dict[str, int] = {}
        for i in range(2):
            port = stack.free_port()
            env = {**self.env, "TTS_WORKER_METRICS_PORT": str(port)}
            proc = stack.start_worker(env, tmp, f"vox{i}", queue="tts-voxcpm")
            ready = stack.wait_for_workers(self.redis, "ready", count=i + 1, timeout=120, proc=proc, engine="voxcpm")
            name = next(n for n in self.names() if n not in self.workers)
            self.workers[name], self.ports[name] = proc, port
        assert len(ready) == 2

    def names(self) -> list[str]:
        return [n.decode() for n in self.redis.zrangebyscore("tts:workers", time.time(), "+inf")]

    def states(self) -> list[WorkerState]:
        names = self.names()
        infos = [json.loads(i) for i in self.redis.hmget("tts:workers:info", names)] if names else []
        return [
            WorkerState(n, i["status"], i["model_version"], i["error"], i["capacity"], i["engine"], i.get("queue", ""))
            for n, i in zip(names, infos, strict=True)
        ]

    def prompts_built(self, name: str) -> float:
        text = httpx.get(f"http://127.0.0.1:{self.ports[name]}/metrics").text
        line = next(line for line in text.splitlines() if line.startswith("tts_worker_voice_prompts_built "))
        return float(line.split()[1])

    def stop(self) -> None:
        for proc in [self.web, self.light, *self.workers.values()]:
            proc.stop()


@pytest.fixture(scope="module")
def cluster(django_db_setup, django_db_blocker, tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("routing"))
    try:
        yield c
    finally:
        c.stop()


def clones(client: httpx.Client, count: int) -> list[str]:
    ids = []
    for i in range(count):
        files = {"audio": (f"v{i}.wav", recording(2 + i), "audio/wav")}
        made = client.post(
            "/audio/voices", data={"name": f"Clone {i}", "model": "voxcpm", "consent": "true"}, files=files
        )
        assert made.status_code == 201, made.text
        ids.append(made.json()["id"])
    for voice_id in ids:
        wait_until(lambda v=voice_id: client.get(f"/audio/voices/{v}").json()["status"] == "ready", 120, "not encoded")
    return ids


def test_a_clones_jobs_run_on_its_owner_which_builds_its_prompt_once(cluster, owner):
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{cluster.base_url}/v1", headers=headers, timeout=120) as client:
        voices = clones(client, 3)
        for round_ in range(3):
            for voice in voices:
                body = {
                    "model": "voxcpm",
                    "voice": voice,
                    "input": f"Round {round_} of the test.",
                    "response_format": "pcm",
                }
                response = client.post("/audio/speech", json=body)
                assert response.status_code == 200 and len(response.content) > 0, response.text
    states = cluster.states()
    assert all(s.queue.startswith("tts-voxcpm.") for s in states) and len({s.queue for s in states}) == 2
    jobs = Job.objects.filter(voice__in=voices, status=Job.Status.SUCCEEDED)
    assert jobs.count() == 9
    owners = [owner_of(v, cluster) for v in voices]
    assert sorted(owners.count(name) for name in cluster.workers) == [1, 2]  # bounded loads: two and one
    for voice, name in zip(voices, owners, strict=True):
        assert {job.worker for job in jobs if job.voice == voice} == {name}, voice  # its three jobs, on its owner
    built = {name: cluster.prompts_built(name) for name in cluster.workers}
    assert built == {name: owners.count(name) for name in cluster.workers}  # each prompt once, on its owner


def owner_of(voice_id: str, cluster: Cluster) -> str:
    """The worker the web gave a cloned voice to (its jobs carry its sample as the reference)."""
    key = affinity({"reference": Voice.objects.get(pk=voice_id).sample})
    return cluster.redis.hget(routing.OWNERS.format("voxcpm"), key).decode()


def test_a_job_routed_to_a_killed_worker_runs_on_the_other_one(cluster, owner):
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{cluster.base_url}/v1", headers=headers, timeout=120) as client:
        (voice,) = clones(client, 1)
        first = client.post("/audio/speech", json={"model": "voxcpm", "voice": voice, "input": "Hi.", "seed": 3})
        assert first.status_code == 200, first.text  # the voice now has an owner
        victim = owner_of(voice, cluster)
        cluster.workers.pop(victim).stop(signal.SIGKILL)  # its registration lingers until it lapses
        job = client.post("/jobs", json={"model": "voxcpm", "voice": voice, "input": "Routed before anyone knew."})
        assert job.status_code == 202, job.text
        job_id = job.json()["id"]
        assert cluster.redis.hget(routing.ROUTED_JOBS, job_id) == routing.own_queue("voxcpm", victim).encode()
        started = time.monotonic()
        wait_until(lambda: Job.objects.get(pk=job_id).status in Job.FINAL, 60, "the routed job never ran")
    stored = Job.objects.get(pk=job_id)
    assert stored.status == Job.Status.SUCCEEDED and stored.worker != victim
    assert time.monotonic() - started < 40  # the registration's lapse (8 s) and beat's next rescue (3 s)
    assert cluster.redis.hget(routing.QUEUES, routing.own_queue("voxcpm", victim)) is None  # its queue gone
