"""Polling: tests wait for what a controller or a task does in another thread, never sleep blindly."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 30.0, interval: float = 0.05, what: str = "") -> T:
    """The first truthy value of ``predicate``, polled every ``interval`` seconds.

    Fails the test with ``AssertionError`` after ``timeout`` seconds, naming ``what`` it waited
    for (or the predicate), so a slow machine shows as a timeout and not as a wrong answer.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
