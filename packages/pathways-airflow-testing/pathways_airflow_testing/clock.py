"""Simulated time for the local cluster: an hour of training can pass in seconds.

Everything time-based in the cluster (step rates, maintenance windows, warm-up, grace periods,
timestamps written into objects) reads this clock, so a test can run a day of scenarios at
``speed=3600`` and the timestamps still read like a real day.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time


class VirtualClock:
    """Wall time scaled by ``speed`` from the moment the clock was made.

    ``now()`` is simulated Unix time; ``await sleep(seconds)`` sleeps *simulated* seconds, that is
    ``seconds / speed`` real seconds.
    """

    def __init__(self, speed: float = 1.0, *, start: float | None = None):
        if speed <= 0:
            raise ValueError(f"speed={speed!r}: must be > 0")
        self.speed = float(speed)
        self._origin_real = time.monotonic()
        self._origin_simulated = time.time() if start is None else start

    def now(self) -> float:
        """Simulated Unix time in seconds."""
        return self._origin_simulated + (time.monotonic() - self._origin_real) * self.speed

    def utcnow(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.now(), tz=dt.timezone.utc)

    def timestamp(self) -> str:
        """RFC 3339 with second precision, as Kubernetes writes times into objects."""
        return self.utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")

    def real_seconds(self, simulated: float) -> float:
        return max(0.0, simulated) / self.speed

    async def sleep(self, simulated_seconds: float) -> None:
        await asyncio.sleep(self.real_seconds(simulated_seconds))
