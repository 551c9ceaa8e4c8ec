"""Chip-hours and goodput of a task's workloads, from the times its waits saw. Pure.

A TPU slice is paid for from the moment it is held until it is given back, whether the program
advanced or not. For every workload a task submitted (:class:`~pathways_airflow.run.records.WorkloadRun`),
the phases its trigger saw split that time into:

* **queued** — from submission until Kueue admitted it (the first phase past ``QUEUED``), and any
  time Kueue put it back in the queue: no chips are held then, so it is reported beside the
  held time, not in it;
* **provisioning** — admitted until the program first ran on every slice (first workload only);
* **productive** — running, less the work a disruption threw away;
* **lost to disruptions**, in three parts: *detection* (the workload failed → the task had the
  verdict), *restart* (the JobSet restarting in place, the disrupted workload's deletion, and the
  next workload's own provisioning) and *recomputed* (steps after the last committed checkpoint
  that the next workload ran again, at the pace the disrupted one ran them);
* **cleanup** — the last workload finished → deleted.

**held** = provisioning + productive + lost + cleanup (admission to deletion, per workload);
**chip-hours** = chips × held; **goodput** = productive / held.

Google's ml-goodput-measurement library defines goodput alike — the share of the time that made
productive, preserved training progress — but reads it from inside the program (its step and
checkpoint logs) and counts from the moment the program starts. Here the program is a black box
seen from the cluster: the clock starts when the chips are held (admission), so provisioning is
in the denominator; time spent inside the program on start-up, data loading or checkpoint saves
counts as productive; steps a JobSet recomputes after an in-place restart are not known (the
head's log is gone) and count as productive too. Recomputed steps after a resubmission are
known (the step reached and the step resumed from) and are lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pathways_airflow.state.model import Phase
from pathways_airflow.run.records import PROGRAM_RECOVERY, Disruption, WorkloadRun
from pathways_airflow.run.timeline import duration


@dataclass(frozen=True)
class Goodput:
    """Where a task's chip time went, in seconds of wall time (multiply by ``chips`` for chip-seconds)."""

    chips: int
    queued: float = 0.0
    provisioning: float = 0.0
    productive: float = 0.0
    detection: float = 0.0
    restart: float = 0.0
    recomputed: float = 0.0
    cleanup: float = 0.0
    disruptions: int = 0

    @property
    def lost(self) -> float:
        """The time lost to disruptions — the one definition, shown alike in the task log, the
        result's ``disruption_summary`` and ``goodput``, and the Pathways view."""
        return self.detection + self.restart + self.recomputed

    @property
    def held(self) -> float:
        return self.provisioning + self.productive + self.lost + self.cleanup

    @property
    def chip_hours(self) -> float:
        return self.chips * self.held / 3600

    @property
    def goodput(self) -> float | None:
        """Productive over held; ``None`` when nothing was held (the workload was never admitted)."""
        return self.productive / self.held if self.held > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "chips": self.chips,
            "held_seconds": round(self.held, 1),
            "chip_hours": round(self.chip_hours, 4),
            "queued_seconds": round(self.queued, 1),
            "provisioning_seconds": round(self.provisioning, 1),
            "productive_seconds": round(self.productive, 1),
            "lost_seconds": round(self.lost, 1),
            "lost": {
                "detection_seconds": round(self.detection, 1),
                "restart_seconds": round(self.restart, 1),
                "recomputed_seconds": round(self.recomputed, 1),
            },
            "cleanup_seconds": round(self.cleanup, 1),
            "goodput": None if self.goodput is None else round(self.goodput, 4),
        }

    def summary(self) -> str:
        """One line for the task log and the demo: the ratio, the chip-hours and where the rest went."""
        ratio = "n/a (never admitted)" if self.goodput is None else f"{self.goodput:.0%}"
        noun = "disruption" if self.disruptions == 1 else "disruptions"
        return (
            f"goodput {ratio} of {self.chip_hours:.3g} chip-hours ({self.chips} chips held {duration(self.held)}): "
            f"productive {duration(self.productive)}, provisioning {duration(self.provisioning)}, "
            f"lost {duration(self.lost)} to {self.disruptions} {noun} (detection {duration(self.detection)}, "
            f"restart {duration(self.restart)}, recomputed {duration(self.recomputed)}), cleanup {duration(self.cleanup)}; "
            f"queued {duration(self.queued)} unheld"
        )


@dataclass
class _Split:
    queued: float = 0.0
    provisioning: float = 0.0
    running: float = 0.0
    detection: float = 0.0
    restart: float = 0.0
    cleanup: float = 0.0


def _spans(run: WorkloadRun, end: float) -> list[tuple[str, float]]:
    """``(phase, seconds)`` from admission to ``end``; the first phase seen stands for the time before it.

    A trigger looks at its workload right after submission, so a first look past ``QUEUED``
    means admission came in between; one re-created mid-wait (a triggerer restart) saw less, and
    its first phase is the best reading of what came before.
    """
    phases = sorted(run.phases, key=lambda p: p.at)
    if not phases:
        return [(Phase.PROVISIONING.value, max(0.0, end - run.submitted))]
    starts = [run.submitted if i == 0 else p.at for i, p in enumerate(phases)]
    stops = [*(p.at for p in phases[1:]), end]
    return [(p.phase, max(0.0, min(stop, end) - start)) for p, start, stop in zip(phases, starts, stops)]


def _split(run: WorkloadRun, *, first: bool, last: bool, now: float) -> _Split:
    split = _Split()
    end = run.ended if run.ended is not None else now
    ran = False
    for phase, seconds in _spans(run, end):
        if phase == Phase.QUEUED.value:
            split.queued += seconds
        elif phase == Phase.PROVISIONING.value and first and not ran:
            split.provisioning += seconds
        elif phase == Phase.RUNNING.value:
            split.running += seconds
            ran = True
        elif phase in (Phase.PROVISIONING.value, Phase.RESTARTING.value):
            split.restart += seconds
        elif phase == Phase.SUCCEEDED.value and last:
            split.cleanup += seconds
        else:  # it failed, or its disruption was being judged
            split.detection += seconds
    tail = max(0.0, (run.deleted if run.deleted is not None else end) - end)
    if run.phases and max(run.phases, key=lambda p: p.at).phase == Phase.QUEUED.value:
        split.queued += tail  # deleted while still queued: it never held a chip
    elif last:
        split.cleanup += tail
    else:
        split.restart += tail
    return split


def goodput_of(runs: Sequence[WorkloadRun], disruptions: Sequence[Disruption], chips: int, *, now: float) -> Goodput:
    """The goodput split of a task's workloads (``runs``, oldest first) on ``chips`` chips.

    ``disruptions``: every disruption of the task; a resubmitted one names the workload it ended.
    ``now`` stands for the end of a workload that has not ended yet.
    """
    ended_by = {d.workload: d for d in disruptions if d.resubmitted and d.workload}
    total = _Split()
    productive = recomputed = 0.0
    for index, run in enumerate(runs):
        split = _split(run, first=index == 0, last=index == len(runs) - 1, now=now)
        disruption = ended_by.get(run.workload)
        # What the disruption's own record says its recomputed steps cost (run.outcome.disruption_of).
        wasted = min(split.running, disruption.seconds_lost) if disruption is not None else 0.0
        productive += split.running - wasted
        recomputed += wasted
        for name in ("queued", "provisioning", "detection", "restart", "cleanup"):
            setattr(total, name, getattr(total, name) + getattr(split, name))
    # A slice loss the program rode out kept the workload running while it waited for the slice:
    # that wait held every chip and trained nothing.
    paused = min(productive, sum(d.seconds_lost for d in disruptions if d.handled_by == PROGRAM_RECOVERY))
    productive -= paused
    total.restart += paused
    return Goodput(
        chips=chips,
        queued=total.queued,
        provisioning=total.provisioning,
        productive=productive,
        detection=total.detection,
        restart=total.restart,
        recomputed=recomputed,
        cleanup=total.cleanup,
        disruptions=len(disruptions),
    )


__all__ = ["Goodput", "goodput_of"]
