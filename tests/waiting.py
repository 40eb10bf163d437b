"""Waiting in tests: poll an observable condition until it holds or a deadline passes, instead of
sleeping for a guessed time and hoping to land inside a window."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], timeout: float, message: str | Callable[[], str], interval: float = 0.05
) -> T:
    """Return the first truthy value of `predicate()`, polled every `interval` s; fail with
    `message` (a string, or a callable for details known only at the end) after `timeout` s.
    The predicate is always checked at least once, and once more at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        left = deadline - time.monotonic()
        if left <= 0:
            detail = message() if callable(message) else message
            raise AssertionError(f"{detail} (waited {timeout:g} s)")
        time.sleep(min(interval, left))
