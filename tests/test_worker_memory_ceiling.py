"""A synthesis worker past its memory ceiling (TTS_WORKER_MAX_MEMORY_MB) finishes the job it has,
says why in its log and exits, to be started again (scripts/run, Compose, Kubernetes); the job is
answered whole and billed once. The stack: uvicorn and one Kokoro worker whose ceiling is below
what any worker holds, on their own Redis database."""

from __future__ import annotations

import httpx
import pytest

from billing.models import UsageEvent
from tests import stack
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def lean(tmp_path, django_db_setup):
    url, client = stack.redis_db(12)
    env = stack.stack_env(url, TTS_WORKER_MAX_MEMORY_MB="64", TTS_ENGINES="kokoro")
    worker = stack.start_worker(env, tmp_path, "lean", queue="tts-kokoro")
    web, base = stack.start_web(env, tmp_path)
    try:
        stack.wait_for_workers(client, "ready", timeout=120, proc=worker)
        yield worker, base
    finally:
        web.stop()
        worker.stop()


def test_a_worker_past_its_memory_ceiling_finishes_its_job_then_leaves(lean, owner):
    worker, base = lean
    spoken = httpx.post(
        f"{base}/v1/audio/speech",
        json={"model": "kokoro", "input": "Hello there.", "voice": "af_heart", "response_format": "pcm"},
        headers={"Authorization": f"Bearer {owner.key}"},
        timeout=60,
    )
    assert spoken.status_code == 200 and len(spoken.content) > 4800, spoken.text  # the whole audio
    wait_until(lambda: worker.popen.poll() is not None, 60, "the worker did not leave")
    assert worker.popen.returncode == 0  # Celery's warm shutdown, not a crash
    log = worker.output()
    assert "worker memory over its ceiling" in log and '"ceiling_mb": 64' in log, log[-2000:]
    assert UsageEvent.objects.filter(organization=owner.org).count() == 1  # billed once
