"""Kubernetes timestamps compared as text, to the second. Pure.

The API server writes RFC 3339 UTC times: ``creationTimestamp``, ``lastTransitionTime``,
``lastTimestamp`` and ``startTime`` to the second, an Event's ``eventTime`` with microseconds.
Cut to the second, any two of them order correctly as strings, on the API server's own clock,
so a rule that compares them never mixes in the triggerer's clock.
"""

from __future__ import annotations

import datetime as dt
from typing import Any


def to_the_second(timestamp: Any) -> str:
    """``2026-11-24T03:10:05`` from any of the API's timestamps; ``""`` (before every time) when absent."""
    return str(timestamp or "")[:19]


def from_unix(seconds: float) -> str:
    """A Unix time (a program's own clock: when it began saving a checkpoint) as :func:`to_the_second` writes it.
    GKE's nodes and control plane keep one time (NTP), so to the second it orders with the API's times."""
    return dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
