"""How far a training run got, from its log. Pure.

MaxText logs ``completed step: N, seconds: ..., TFLOP/s/device: ...`` after every step; the last
such line before a disruption tells how many steps a resume from an older checkpoint recomputes.
"""

from __future__ import annotations

import re
from typing import Iterable

_COMPLETED_STEP = re.compile(r"completed step: (\d+)")


def last_completed_step(lines: Iterable[str]) -> int | None:
    """The highest ``completed step: N`` in the lines, or ``None`` if there is none."""
    steps = [int(m.group(1)) for line in lines for m in _COMPLETED_STEP.finditer(line)]
    return max(steps) if steps else None


def steps_recomputed(reached: int | None, resumed_from: int | None) -> int:
    """Steps done again after resuming: from the checkpoint's step (or 0) up to where the run got."""
    if reached is None:
        return 0
    start = -1 if resumed_from is None else resumed_from
    return max(0, reached - start)
