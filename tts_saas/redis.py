"""Redis connections: one sync client per process, one asyncio client per event loop."""

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
    return redis.Redis.from_url(settings.REDIS_URL, health_check_interval=30)


def get_async_redis() -> aredis.Redis:
    loop = asyncio.get_running_loop()
    client = _async_clients.get(loop)
    if client is None:
        client = aredis.Redis.from_url(settings.REDIS_URL, health_check_interval=30)
        _async_clients[loop] = client
    return client
