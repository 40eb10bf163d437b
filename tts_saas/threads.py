"""Running blocking work (the ORM, codecs, text normalisation) from async code."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async

P = ParamSpec("P")
R = TypeVar("R")


def in_thread(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`fn` run in a worker thread of its own: not Django's single thread-sensitive executor, on
    which every sync call of every request would queue behind the others."""
    return sync_to_async(fn, thread_sensitive=False)
