"""Isolation for the live tier run in parallel (pytest-xdist): each xdist worker gets a block of
Redis databases of its own, so that its live stack (web, Celery workers, their broker queues,
worker registry, caches and chunk streams) never sees another's. Its PostgreSQL database is
already its own (pytest-django names it `test_tts_gw<N>`), and every server a test starts takes a
free port.

Each worker's processes (its pytest, its stack's web and Celery workers) run torch on one thread:
with several workers on a few cores, OpenMP threads that wait for their core at every barrier
spin on it, and the engine tests' CPU time grew sixfold with torch's default of a thread per core.

Loaded with `-p tests.parallel` (scripts/test does): a plugin named there is imported before
pytest-django reads the settings, which is when REDIS_URL must already say the worker's database.
Worker N uses databases 16·N … 16·N+15 (`tests.stack.redis_db(n)` adds its base), so the Redis
server needs 16 × workers databases (scripts/test starts it with 128)."""

from __future__ import annotations

import os

import pytest

DATABASES_PER_WORKER = 16


def worker_number() -> int | None:
    """This process's xdist worker number (gw3 → 3), None outside xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name.removeprefix("gw")) if name.startswith("gw") else None


def _shift_redis_url() -> None:
    number = worker_number()
    url = os.environ.get("REDIS_URL")
    if number is None or not url:
        return
    base, _, db = url.rpartition("/")
    os.environ["REDIS_URL"] = f"{base}/{int(db or 0) + DATABASES_PER_WORKER * number}"


def _one_thread_each() -> None:
    if worker_number() is not None:
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, "1")


_shift_redis_url()
_one_thread_each()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files marked `long` first: xdist hands out files in this order, so a long one started last
    would leave the other workers idle while it ends. Before pytest-django's own ordering (tests
    on the database's transaction, then transactional ones, then the rest), which is stable: a
    long file goes first within its group, never ahead of it."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
