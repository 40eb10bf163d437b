"""Running blocking work (the ORM, codecs, text normalisation) from async code."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

P = ParamSpec("P")
R = TypeVar("R")


def close_broken_connections() -> None:
    """Close this thread's database connections that failed and no longer answer (the server
    restarted or failed over), so that the thread's next query connects afresh. Django does this
    on request start and end, but only on the thread that handles the request's signals."""
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None and connection.errors_occurred and not connection.is_usable():
            connection.close()


def in_thread(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`fn` run in a worker thread of its own: not Django's single thread-sensitive executor, on
    which every sync call of every request would queue behind the others. The pool's threads
    keep their database connections between calls; one broken by a database restart is dropped
    when a call fails on it."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except Exception:
            close_broken_connections()
            raise

    return sync_to_async(run, thread_sensitive=False)
