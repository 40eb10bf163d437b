"""Shared fixtures: the live stack (real uvicorn + real Celery worker with the tiny random
checkpoint through ChatTTS's loader), personas and a Redis client.

Redis and PostgreSQL are started by scripts/test, which exports REDIS_URL, DATABASE_URL and
TTS_TEST_CHECKPOINT before running pytest.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import httpx
import pytest
from django.conf import settings
from django.core.management.base import CommandError
from django.db import OperationalError
from django.test import TransactionTestCase

from accounts.models import Organization
from billing.limits import subscription_for
from billing.models import Plan
from billing.plans import ensure_plans
from tests import stack
from tests.identity import DnsServer
from tts_saas.redis import get_redis


def pytest_configure(config):
    missing = [v for v in ("REDIS_URL", "TTS_TEST_CHECKPOINT") if not os.environ.get(v)]
    if missing:
        raise pytest.UsageError(
            f"{', '.join(missing)} not set: run the tests with ./scripts/test, which starts Redis and "
            "PostgreSQL and makes the tiny checkpoint."
        )
    if os.environ.get("PYTEST_XDIST_WORKER") and "tests.parallel" not in sys.modules:
        raise pytest.UsageError("in parallel (-n), load tests.parallel too: python -m pytest -p tests.parallel -n N")
    TransactionTestCase._fixture_teardown = _flush_retrying_deadlocks(TransactionTestCase._fixture_teardown)


def _flush_retrying_deadlocks(teardown):
    """A transactional test ends by truncating every table. The live stack's worker and web
    processes may still be writing then (a cancelled job settling its usage a moment after the
    client heard "cancelled"): PostgreSQL can pick the TRUNCATE as a deadlock's victim. The
    other writer commits, so the flush is tried again instead of failing the test that ended."""

    def retrying(self):
        for attempt in range(5):
            try:
                return teardown(self)
            except CommandError as exc:
                cause = exc.__cause__  # Django's OperationalError over psycopg's DeadlockDetected (40P01)
                deadlock = isinstance(cause, OperationalError) and getattr(cause.__cause__, "sqlstate", "") == "40P01"
                if attempt == 4 or not deadlock:
                    raise
                time.sleep(0.2 * (attempt + 1))

    return retrying


# Fixtures through which a test touches the database (directly or through the live web process).
DATABASE_FIXTURES = frozenset(
    {"db", "transactional_db", "django_db_setup", "live_stack", "owner", "member", "outsider"}
)


def uses_database(request: pytest.FixtureRequest) -> bool:
    return request.node.get_closest_marker("django_db") is not None or not DATABASE_FIXTURES.isdisjoint(
        request.fixturenames
    )


# The suite's deployment is an operator who named ChatTTS the default model (TTS_DEFAULT_MODEL): its
# tests of seeds, speakers, cloning and the playground were written against it. Unset, the default is
# the first served model whose audio may be sold (tests/unit/test_default_model.py, and the
# dashboard's own test in tests/test_dashboard_models.py).
SUITE_DEFAULT_MODEL = "chattts"


@pytest.fixture(autouse=True)
def operator_default_model(settings) -> None:
    """This process's settings as the live stacks' (`stack.stack_env`): ChatTTS named the default."""
    settings.TTS_DEFAULT_MODEL = SUITE_DEFAULT_MODEL


@pytest.fixture(autouse=True)
def default_plans(request: pytest.FixtureRequest, django_db_blocker) -> None:
    """The default plans exist in every test that uses the database. The migrations seed them,
    but transactional tests flush every table when they end, and production code does not seed
    again. The live web process shares the test database, so seeding from here serves it too."""
    if not uses_database(request):
        return
    # Database access first (the django_db marker's own fixture may run after this one).
    if "transactional_db" in request.fixturenames:
        request.getfixturevalue("transactional_db")
    elif "db" in request.fixturenames or request.node.get_closest_marker("django_db") is not None:
        request.getfixturevalue("db")  # a marker's transaction=True still applies
    with django_db_blocker.unblock():
        ensure_plans(Plan)


@pytest.fixture(autouse=True)
def fresh_throttles(request: pytest.FixtureRequest) -> None:
    """Every test starts with no sign-in/sign-up attempts counted: they all come from 127.0.0.1,
    and the throttles' windows (an hour for sign-up) would otherwise outlast many tests."""
    if uses_database(request):
        r = get_redis()
        keys = list(r.scan_iter(match=f"{settings.CACHES['default']['KEY_PREFIX']}:1:rl:*", count=1000))
        if keys:
            r.delete(*keys)


@pytest.fixture(scope="session")
def redis_client():
    return get_redis()


@pytest.fixture
def empty_audio_cache(redis_client):
    """No audio cache entries before the test, none left after it."""

    def wipe():
        for key in redis_client.scan_iter("tts:audio:*"):
            redis_client.delete(key)

    wipe()
    yield
    wipe()


@dataclass
class LiveStack:
    base_url: str
    web: stack.Proc
    worker: stack.Proc  # ChatTTS's (the tiny random checkpoint)
    worker_metrics_port: int
    kokoro_worker: stack.Proc  # Kokoro's (its tiny random checkpoint)
    dns: DnsServer  # the web's DNS for domain proofs (single sign-on): tests add TXT records to it

    def client(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=f"{self.base_url}/v1", headers=headers, timeout=120)


@pytest.fixture(scope="session")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory, redis_client):
    dns = DnsServer()
    env = stack.stack_env(
        settings.REDIS_URL,
        TTS_DNS_NAMESERVERS=dns.address,
        TTS_DNS_PORT=str(dns.port),
        TTS_SSO_ALLOW_PRIVATE="1",  # the tests' identity provider listens on loopback
    )
    log_dir = tmp_path_factory.mktemp("stack")
    metrics_port = stack.free_port()
    worker = stack.start_worker({**env, "TTS_WORKER_METRICS_PORT": str(metrics_port)}, log_dir, "main")
    kokoro = stack.start_worker(env, log_dir, "kokoro", queue="tts-kokoro")
    light = stack.start_worker(env, log_dir, "light", queue="default")  # callbacks
    web, base = stack.start_web(env, log_dir)
    try:
        stack.wait_for_workers(redis_client, "ready", proc=worker, engine="chattts")
        stack.wait_for_workers(redis_client, "ready", proc=kokoro, engine="kokoro")
        yield LiveStack(base, web, worker, metrics_port, kokoro, dns)
    finally:
        dns.close()
        web.stop()
        worker.stop()
        kokoro.stop()
        light.stop()


@dataclass
class Persona:
    org: object
    key: str


def make_persona(name: str, kind: str = "admin", **limits) -> Persona:
    """An organization with one key; `limits` override its plan's (e.g. requests_per_minute=5)."""
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
