"""Readers of operator and sensor arguments that may not be known until the task runs. Pure.

Airflow renders templated fields (``"{{ ds }}"``) and resolves XCom references only when the
task runs, so a check made when the DAG is parsed must skip what is not known yet and make it
again on the rendered value.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pathways_airflow.checkpoints import is_gcs, split_gcs_uri
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem, raise_if_any
from pathways_airflow.spec.names import check_name_prefix, is_dns1123_label
from pathways_airflow.spec.render import BACKENDS


def looks_templated(value: Any) -> bool:
    """True if ``value`` (or anything inside it) will only be known after Jinja or XCom resolution."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, Mapping):
        return any(looks_templated(k) or looks_templated(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set)):
        return any(looks_templated(v) for v in value)
    # XComArg and other lazy values resolve at run time.
    return hasattr(value, "resolve") or hasattr(value, "iter_references")


def known_problems(problems: Iterable[SpecProblem], values: Mapping[str, Any]) -> list[SpecProblem]:
    """The problems a DAG's parse can already know, all of them at once: none about a parameter
    that is still a template (``values`` by parameter name), which only the run will know."""
    return [p for p in problems if not looks_templated(values.get(p.field.split(".")[0].split("[")[0]))]


TASK_LIMIT = "execution_timeout"
"""The task's own time limit, as a wait that runs out of it names it (and raises ``AirflowTaskTimeout``)."""
POLL_INTERVAL_SECONDS = {"job": 10.0, "server": 10.0, "workload": 300.0, "slices": 60.0, "checkpoint": 60.0, "asset": 300.0}
"""How often a wait looks anyway, by what it waits on, when nothing wakes it sooner (every wait
here is woken by a watch, or is a sensor's poke): a Job or a server within seconds, slices or a
checkpoint within a minute, an asset watcher's checkpoint scan every five. A workload's wait
watches every object its state is made of, and looks sooner whenever the clock alone makes a
look due (:func:`~pathways_airflow.run.wait_memory.look_again_within`); its look anyway, every
five minutes, is only the safety net under the watches: at one a minute, 10,000 idle waits took
some 11,400 looks a minute, about 13 s of a triggerer's CPU (``benchmarks/README.md``)."""
DELETE_POLL_SECONDS = 1.0
"""The longest pause of a wait for deleted objects to be gone: their TPUs are freed only then."""


def poll_interval_problem(value: Any, field: str = "poll_interval") -> SpecProblem | None:
    """A ``poll_interval`` (or a sensor's ``poke_interval``) must be a number of seconds > 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return SpecProblem(field, value, "must be a number of seconds > 0")
    return None


def deletion_poll(poll_interval: float) -> float:
    """How long a wait for a deletion pauses between looks: the task's interval, at most :data:`DELETE_POLL_SECONDS`."""
    return min(float(poll_interval), DELETE_POLL_SECONDS)


STEP_NUMBER = "must be a step number (an integer ≥ 0)"
_DIGITS = re.compile(r"\s*[0-9]{1,30}\s*")  # not "²": isdigit() is true for it, int() refuses it


def step_number(field: str, value: Any, *, required: bool = True) -> tuple[int | None, SpecProblem | None]:
    """A step number from an int or the string a template renders it to (``"80"`` is 80).

    Not ``required`` (a bound such as ``min_step``): ``None``, ``""`` and ``"None"`` — what
    Jinja makes of an XCom that held nothing — mean "unset". Required, they are refused.
    """
    if not required and (value is None or (isinstance(value, str) and value.strip() in ("", "None"))):
        return None, None
    if isinstance(value, bool):
        return None, SpecProblem(field, value, STEP_NUMBER)
    if isinstance(value, int) and value >= 0:
        return value, None
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        return int(value.strip()), None
    return None, SpecProblem(field, value, STEP_NUMBER)


def storage_dir_problem(field: str, value: Any, *, local: bool = True, reason: str | None = None) -> SpecProblem | None:
    """Why ``value`` is not a usable ``gs://BUCKET[/PATH]`` (or, with ``local``, an absolute local path).

    One rule for every directory the provider reads or writes: checkpoints, reports. A bucket
    is required (``gs://`` alone names nothing), and glob characters are refused because the
    storage client would take them literally while a user meant a pattern.
    """
    reason = reason or "must be a gs://BUCKET/PATH URI" + (" or an absolute local path" if local else "")
    if not isinstance(value, str) or not value.strip() or any(c in value for c in "\n*?["):
        return SpecProblem(field, value, reason)
    if is_gcs(value):
        try:
            split_gcs_uri(value)
        except ValueError:
            return SpecProblem(field, value, reason)
        return None
    if not local or not os.path.isabs(value):
        return SpecProblem(field, value, reason)
    return None


def namespace_problem(value: Any, field: str = "namespace") -> SpecProblem | None:
    """Why ``value`` cannot be a Kubernetes namespace (a DNS label), or ``None``."""
    if isinstance(value, str) and is_dns1123_label(value):
        return None
    return SpecProblem(field, value, "must be a DNS label (≤ 63 of [a-z0-9-])")


def checkpoint_arguments(checkpoint_dir: Any, min_step: Any, newer_than: Any) -> tuple[str, int | None, int | None]:
    """The validated ``(checkpoint_dir, min_step, newer_than)``; one ``ValueError`` listing every problem."""
    problems = []
    directory_problem = storage_dir_problem("checkpoint_dir", checkpoint_dir)
    if directory_problem:
        problems.append(directory_problem)
    minimum, problem = step_number("min_step", min_step, required=False)
    if problem:
        problems.append(problem)
    newer, problem = step_number("newer_than", newer_than, required=False)
    if problem:
        problems.append(problem)
    raise_if_any(problems)
    return str(checkpoint_dir).strip(), minimum, newer


def exit_codes_problem(field: str, value: Any) -> SpecProblem | None:
    """Why ``value`` is not a list of process exit codes (integers 1–255), or ``None``."""
    if not isinstance(value, tuple):
        return SpecProblem(field, value, "must be a list of exit codes (1-255)")
    bad = [c for c in value if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= 255]
    return SpecProblem(field, bad[0], "exit codes are integers from 1 to 255") if bad else None


RESUME_NEWEST_COMMITTED = "newest_committed"
"""``resume=``: after a disruption, hand the program the newest committed checkpoint on GCS
(``PATHWAYS_RESUME_STEP`` / ``PATHWAYS_RESUME_CHECKPOINT``)."""
RESUME_BY_PROGRAM = "program"
"""``resume=``: hand the program nothing and let it pick its source (its own run directory, a
local or a peer's copy with multi-tier checkpointing, an HBM snapshot): forcing the GCS step
would pre-empt a faster, newer path the program has."""
RESUME_POLICIES = (RESUME_NEWEST_COMMITTED, RESUME_BY_PROGRAM)


def resume_problem(value: Any) -> SpecProblem | None:
    """Why ``resume`` is not a known policy, or ``None``."""
    if value in RESUME_POLICIES:
        return None
    return SpecProblem("resume", value, f"must be one of {', '.join(repr(p) for p in RESUME_POLICIES)}")


def handed_to_program(resume: str, newest_committed: Any) -> Any:
    """What a resubmitted workload is told to resume from: the newest committed checkpoint, or
    nothing when the program picks (:data:`RESUME_BY_PROGRAM`)."""
    return None if resume == RESUME_BY_PROGRAM else newest_committed


def workload_placement_problems(
    *, backend: Any, namespace: Any, name_prefix: Any, checkpoint_dir: Any, resume: Any = RESUME_NEWEST_COMMITTED
) -> list[SpecProblem]:
    """Where a Pathways workload goes, under which name, and where a resubmission resumes from:
    checked before any API call."""
    problems = list(filter(None, [resume_problem(resume)]))
    if backend not in BACKENDS:
        problems.append(SpecProblem("backend", backend, "unknown backend", BACKENDS))
    problems.extend(filter(None, [namespace_problem(namespace)]))
    try:
        check_name_prefix(name_prefix)
    except InvalidWorkloadSpec as error:
        problems.extend(error.problems)
    if checkpoint_dir is not None:
        problems.extend(filter(None, [storage_dir_problem("checkpoint_dir", checkpoint_dir)]))
    return problems


ALL_NAMESPACES = "*"


def rendered_flag(value: Any) -> bool | None:
    """``True``/``False``, or a template's rendering of them (``"True"``, ``"false"``); ``None``
    for anything else, which the caller refuses rather than guesses."""
    return {"true": True, "false": False}.get(str(value).strip().lower()) if isinstance(value, (bool, str)) else None


def janitor_arguments(namespace: Any, grace_period_seconds: Any, dry_run: Any) -> tuple[str | None, float, bool]:
    """The janitor's rendered arguments: the namespace (``None``: all of them, written ``None`` or
    ``"*"``), the grace period in seconds, and whether it is a dry run. A template renders
    ``True`` as ``"True"``: both spellings are read, anything else is refused, never guessed."""
    problems = []
    every = namespace is None or namespace == ALL_NAMESPACES
    problems.append(None if every else namespace_problem(namespace))
    try:
        grace = float(grace_period_seconds)
    except (TypeError, ValueError):
        grace = -1.0
    if isinstance(grace_period_seconds, bool) or not grace >= 0:
        problems.append(SpecProblem("grace_period_seconds", grace_period_seconds, "must be a number of seconds ≥ 0"))
    flag = rendered_flag(dry_run)
    if flag is None:
        problems.append(SpecProblem("dry_run", dry_run, "must be True or False"))
    raise_if_any([p for p in problems if p])
    return (None if every else namespace), grace, bool(flag)


KUEUE_TIMEOUT_MARGIN_SECONDS = 120
"""How much longer than ``execution_timeout`` Kueue lets a workload run before it stops it.

Kueue's limit is a backstop for when Airflow is gone; while Airflow is there, its own timeout must
fire first, so the task fails as a timeout and deletes its workload itself. Two minutes cover the
triggerer noticing the deadline and the deletion (Kueue counts from admission, later still)."""


def kueue_max_exec_time(explicit: Any, execution_timeout: dt.timedelta | None, queue_name: Any) -> Any:
    """The value of Kueue's max-exec-time label: ``explicit`` if given (checked later, like every
    argument), else ``execution_timeout`` in whole seconds plus the margin for a queued workload,
    else ``None`` (Kueue enforces it only on a workload it queues)."""
    if explicit is not None or execution_timeout is None or not queue_name:
        return explicit
    return math.ceil(execution_timeout.total_seconds()) + KUEUE_TIMEOUT_MARGIN_SECONDS
