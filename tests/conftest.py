"""Shared fixtures: the live stack (real uvicorn + real Celery worker with the tiny random
checkpoint through ChatTTS's loader), personas and a Redis client.

Redis and PostgreSQL are started by scripts/test, which exports REDIS_URL, DATABASE_URL and
TTS_TEST_CHECKPOINT before running pytest.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import httpx
import pytest
from django.conf import settings

from tests import stack


def pytest_configure(config):
    missing = [v for v in ("REDIS_URL", "TTS_TEST_CHECKPOINT") if not os.environ.get(v)]
    if missing:
        raise pytest.UsageError(
            f"{', '.join(missing)} not set: run the tests with ./scripts/test, which starts Redis and "
            "PostgreSQL and makes the tiny checkpoint."
        )


@pytest.fixture(scope="session")
def redis_client():
    from tts_saas.redis import get_redis

    return get_redis()


@dataclass
class LiveStack:
    base_url: str
    web: stack.Proc
    worker: stack.Proc

    def client(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=f"{self.base_url}/v1", headers=headers, timeout=120)


@pytest.fixture(scope="session")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory, redis_client):
    env = stack.stack_env(settings.REDIS_URL)
    log_dir = tmp_path_factory.mktemp("stack")
    worker = stack.start_worker(env, log_dir, "main")
    light = stack.start_worker(env, log_dir, "light", queue="default")  # callbacks
    web, base = stack.start_web(env, log_dir)
    try:
        stack.wait_for_workers(redis_client, "ready", proc=worker)
        yield LiveStack(base, web, worker)
    finally:
        web.stop()
        worker.stop()
        light.stop()


@dataclass
class Persona:
    org: object
    key: str


def make_persona(name: str, kind: str = "admin", **limits) -> Persona:
    """An organization with one key; `limits` override its plan's (e.g. requests_per_minute=5)."""
    from accounts.models import Organization
    from billing.limits import subscription_for

    org = Organization.objects.create(name=name, slug=name.lower().replace(" ", "-"))
    _, raw = org.create_api_key(f"{name} key", kind=kind)
    if limits:
        sub = subscription_for(org)
        for field, value in limits.items():
            setattr(sub, field, value)
        sub.save()
    return Persona(org, raw)


# Test personas poll job status: their rate limit is raised (tests of the limit make their own).
PERSONA_RATE = 6000


@pytest.fixture
def owner(transactional_db) -> Persona:
    return make_persona("Acme", requests_per_minute=PERSONA_RATE)


@pytest.fixture
def member(owner) -> Persona:
    """A standard (non-admin) key of the owner's organization."""
    _, raw = owner.org.create_api_key("member key")
    return Persona(owner.org, raw)


@pytest.fixture
def outsider(transactional_db) -> Persona:
    return make_persona("Globex", requests_per_minute=PERSONA_RATE)
