"""Redis connections: one sync client per process, one asyncio client per event loop. Both draw
from blocking pools of REDIS_MAX_CONNECTIONS: under load a caller waits (up to
REDIS_POOL_TIMEOUT seconds) for a free connection instead of failing with "Too many connections"
(each open audio stream holds one while it waits for the worker's next chunk)."""

from __future__ import annotations

import asyncio
import functools
import weakref

import redis
import redis.asyncio as aredis
from django.conf import settings

_async_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@functools.cache
def get_redis() -> redis.Redis:
    pool = redis.BlockingConnectionPool.from_url(
        settings.REDIS_URL,
        max_connections=settings.REDIS_MAX_CONNECTIONS,
        timeout=settings.REDIS_POOL_TIMEOUT,
        health_check_interval=30,
    )
    return redis.Redis(connection_pool=pool)


def get_async_redis() -> aredis.Redis:
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        pool = aredis.BlockingConnectionPool.from_url(
            settings.REDIS_URL,
            max_connections=settings.REDIS_MAX_CONNECTIONS,
            timeout=settings.REDIS_POOL_TIMEOUT,
            health_check_interval=30,
        )
        client = aredis.Redis(connection_pool=pool)
        _async_clients[loop] = client
    return client
