"""``PathwaysJobSensor``: wait until a PathwaysJob (or JobSet) reaches a phase, or ends.

Reads the workload through the same state machine as the operator
(:func:`pathways_airflow.state.status.workload_state`): ``RUNNING`` means the head is running
and every slice is ready — not merely that the PathwaysJob says ``Running``, which it keeps
saying while its JobSet restarts. Watching is all it does: it never deletes the workload,
which belongs to whoever submitted it.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Sequence

from airflow.sdk import PokeReturnValue
from airflow.providers.common.compat.sdk import AirflowSensorTimeout

from pathways_airflow.sensors.base import DeferrableSensor
from pathways_airflow.spec.arguments import looks_templated, namespace_problem
from pathways_airflow.exceptions import KubernetesApiError, PermissionMissingError, WorkloadEndedError
from pathways_airflow.connection import CLUSTER_TEMPLATE_FIELDS, ClusterConnectionMixin
from pathways_airflow.spec.errors import SpecProblem, raise_if_any
from pathways_airflow.spec.names import is_dns1123_label
from pathways_airflow.spec.render import BACKENDS
from pathways_airflow.state.model import Phase, WorkloadState
from pathways_airflow.state.status import has_reached
from pathways_airflow.run.outcome import workload_failure

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.triggers.base import BaseTrigger

TARGET_PHASES: tuple[str, ...] = (Phase.RUNNING.value, Phase.SUCCEEDED.value)


# --- pure --------------------------------------------------------------------------------------


def sensor_problems(name: Any, namespace: Any, backend: Any, phase: Any) -> list[SpecProblem]:
    problems = []
    if not isinstance(name, str) or not is_dns1123_label(name):
        # A PathwaysJob or JobSet name is a DNS label; anything else ("..", "a/b", "x,y=z") would
        # change which URL or label selector the sensor reads.
        problems.append(SpecProblem("name", name, "must be the workload's name (a DNS label: ≤ 63 of [a-z0-9-])"))
    problems.extend(filter(None, [namespace_problem(namespace)]))
    if backend not in BACKENDS:
        problems.append(SpecProblem("backend", backend, "unknown backend", BACKENDS))
    if str(phase).upper() not in TARGET_PHASES:
        problems.append(SpecProblem("phase", phase, "cannot be waited for", TARGET_PHASES))
    return problems


def ended_early(state: WorkloadState, phase: str) -> bool:
    """It can no longer reach ``phase``: it failed (or was deleted) first."""
    return state.phase is Phase.FAILED and not has_reached(state, phase)


def failure_of(state: WorkloadState, where: str, phase: str) -> Exception:
    """The exception for a workload that ended before ``phase``: the one rule, for a workload the task does not own."""
    return workload_failure(state, f"{where} ended before reaching {phase}: {state.summary()}", owned=False)


# --- the sensor --------------------------------------------------------------------------------


class PathwaysJobSensor(ClusterConnectionMixin, DeferrableSensor):
    """Wait until workload ``name`` reaches ``phase``; fail if it ends FAILED first.

    :param name: the PathwaysJob's (or JobSet's) name, e.g. from the operator's XCom
        (``{{ ti.xcom_pull(task_ids='train', key='pathways_workload')['name'] }}``).
    :param namespace: its namespace.
    :param backend: ``"pathwaysjob"`` or ``"jobset"``, as it was submitted.
    :param phase: ``"RUNNING"`` (head running, every slice ready; a workload that already
        succeeded counts too) or ``"SUCCEEDED"``.
    :param kubernetes_conn_id: and the other cluster parameters: see
        :class:`~pathways_airflow.connection.ClusterConnectionMixin`.

    The XCom value is the workload's state (``WorkloadState.to_dict()``). A workload that does
    not exist yet is waited for (in the worker, even when deferrable: the trigger takes a
    missing workload for a deleted one); one that disappears after it was seen fails the sensor.
    """

    template_fields: Sequence[str] = ("name", "namespace", "backend", "phase", *CLUSTER_TEMPLATE_FIELDS)
    ui_color = "#b3e5fc"

    def __init__(
        self,
        *,
        name: str,
        namespace: str = "default",
        backend: str = "pathwaysjob",
        phase: str = "RUNNING",
        poke_interval: timedelta | float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.name = name
        self.namespace = namespace
        self.backend = backend
        self.phase = phase
        self._seen = False
        self._previous: WorkloadState | None = None

        if not looks_templated([name, namespace, backend, phase]):
            raise_if_any(sensor_problems(name, namespace, backend, phase))

    @property
    def target_phase(self) -> str:
        return str(self.phase).upper()

    @property
    def where(self) -> str:
        kind = "PathwaysJob" if self.backend == "pathwaysjob" else "JobSet"
        return f"{kind} {self.namespace}/{self.name}"

    def read_state(self) -> WorkloadState:
        """The workload's state now (remembering whether it has been seen to exist)."""
        from pathways_airflow.run.messages import transition_line
        from pathways_airflow.state.status import workload_state

        observation = self.hook.observe(self.backend, self.name, self.namespace, submitted=self._seen)
        top = observation.pathwaysjob if self.backend == "pathwaysjob" else observation.jobset
        self._seen = self._seen or top is not None
        state = workload_state(observation)
        line = transition_line(self._previous, state)
        if line:
            self.log.info("%s: %s", self.where, line)
        self._previous = state
        return state

    def poke(self, context: Context) -> PokeReturnValue:
        raise_if_any(sensor_problems(self.name, self.namespace, self.backend, self.phase))
        state = self.read_state()
        return self._decide(state)

    def _decide(self, state: WorkloadState) -> PokeReturnValue:
        if has_reached(state, self.target_phase):
            return PokeReturnValue(is_done=True, xcom_value=state.to_dict())
        if ended_early(state, self.target_phase):
            raise failure_of(state, self.where, self.target_phase)
        return PokeReturnValue(is_done=False)

    def before_deferring(self, context: Context) -> PokeReturnValue | None:
        """The trigger takes a missing workload for a deleted one: wait here until it exists."""
        if self._seen:
            return None
        self.log.info("%s does not exist yet; waiting for it here before deferring", self.where)
        self._wait_until_created()
        return self.poke(context)

    def trigger(self) -> BaseTrigger:
        from pathways_airflow.triggers.workload import PathwaysJobTrigger

        return PathwaysJobTrigger(
            name=self.name,
            namespace=self.namespace,
            backend=self.backend,
            target=self.hook.resolved_target().to_dict(),
            last_state=self._previous.to_dict() if self._previous else None,
            until_phase=self.target_phase,
            delete_on_timeout=False,
        )

    def _wait_until_created(self) -> None:
        deadline = time.monotonic() + self.timeout
        while not self._seen:
            if time.monotonic() >= deadline:
                raise AirflowSensorTimeout(f"{self.where} was not created within {self.timeout:.0f} s")
            time.sleep(float(self.poke_interval))
            self.read_state()

    def finish(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """The phase was reached, the workload ended, or the API failed."""
        if event.get("status") != "finished":
            raise (PermissionMissingError if event.get("forbidden") else KubernetesApiError)(
                f"stopped watching {self.where}: {event.get('message')}"
            )
        state = WorkloadState.from_dict(event["state"])
        decision = self._decide(state)
        if not decision.is_done:  # the trigger stops only at the phase or at the end
            raise WorkloadEndedError(f"{self.where} stopped in an unexpected state: {state.summary()}")
        return decision.xcom_value
