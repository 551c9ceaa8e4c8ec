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


def seconds_recomputed(ran_seconds: float, reached: int | None, resumed_from: int | None, started_at: int | None) -> float:
    """The time the steps a resume does again took, at the pace the run went.

    The run started at step ``started_at`` (``None``: from scratch) and reached ``reached`` in
    ``ran_seconds``; the steps after ``resumed_from`` are done again by the next run.
    """
    recomputed = steps_recomputed(reached, resumed_from)
    if reached is None or not recomputed or ran_seconds <= 0:
        return 0.0
    progressed = reached - (-1 if started_at is None else started_at)
    return ran_seconds if progressed <= 0 else min(ran_seconds, ran_seconds * recomputed / progressed)


def steps_recomputed(reached: int | None, resumed_from: int | None) -> int:
    """Steps done again after resuming: from the checkpoint's step (or 0) up to where the run got."""
    if reached is None:
        return 0
    start = -1 if resumed_from is None else resumed_from
    return max(0, reached - start)


# What MaxText logs as it restores (maxtext ``src/maxtext/common/checkpointing.py``,
# ``load_state_if_possible``): the step it found across its checkpoint manager's tiers (with
# multi-tier or emergency checkpointing, a local or a peer's copy may be newer than GCS's), or
# that it found none and starts from scratch.
_RESTORED = re.compile(r"restoring from this run's directory step (\d+)")
_NOTHING_RESTORED = "No existing checkpoints found, not restoring checkpoint."
FROM_SCRATCH = -1
"""What :func:`step_resumed_from` answers for a program that said it restored nothing."""


def step_resumed_from(lines: Iterable[str]) -> int | None:
    """The step the program says it restored at start-up (:data:`FROM_SCRATCH` when it says it
    found none), or ``None`` while its log has not said (yet). The first such line counts: an
    elastic retry restores again later in the same run, after a loss the task did not resubmit."""
    for line in lines:
        found = _RESTORED.search(line)
        if found:
            return int(found.group(1))
        if _NOTHING_RESTORED in line:
            return FROM_SCRATCH
    return None
