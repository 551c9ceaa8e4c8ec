"""Typed failures, so DAG authors can route them with Airflow's retry policies.

Deterministic failures (a bug in the user's program, a spec the cluster refuses, an object that
belongs to someone else) derive from ``AirflowFailException``: Airflow does not retry them.
Infrastructure failures derive from ``AirflowException``: retrying them may help.
"""

from __future__ import annotations

from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException


class PathwaysError(AirflowException):
    """Base of every pathways-airflow failure."""


class UserCodeError(PathwaysError, AirflowFailException):
    """The user's program exited non-zero with no sign of an infrastructure disruption."""

    def __init__(self, message: str, *, exit_code: int | None = None):
        super().__init__(message)
        self.exit_code = exit_code


class BadSpecError(PathwaysError, AirflowFailException):
    """The cluster refused the workload as specified (schema, topology, missing queue)."""


class ForeignWorkloadError(PathwaysError, AirflowFailException):
    """An object with our workload's name exists and was not created for this task."""


class WorkloadDeletedError(PathwaysError, AirflowFailException):
    """Someone else deleted the workload (or Job, or server) while the task waited on it.

    A person who runs ``kubectl delete`` on a running workload means "stop": a retry would
    submit it again and undo that, so Airflow does not retry it.
    """


class WorkloadEndedError(PathwaysError, AirflowFailException):
    """A workload a sensor watches ended (failed, or was deleted) before reaching the awaited phase.

    Retrying the sensor cannot change how someone else's workload ended, so Airflow does not retry it.
    """


class PermissionMissingError(PathwaysError, AirflowFailException):
    """The task's Kubernetes identity lacks a verb it needs (RBAC): a retry fails the same way until
    it is granted (``docker/rbac.yaml`` lists what the provider needs)."""


class InfrastructureError(PathwaysError):
    """The cluster or the platform ended the workload (disruption, unknown infrastructure failure)."""


class KubernetesApiError(PathwaysError):
    """The Kubernetes API kept failing after retries."""


class StorageUnavailableError(InfrastructureError):
    """GCS stayed unreachable (refused or dropped connections, 429, 5xx) until the task's deadline."""


class DisruptionBudgetExhausted(PathwaysError):
    """More disruptions (maintenance, preemption, slice loss) than ``max_disruptions`` allows."""

    def __init__(self, message: str, *, disruptions: list[dict] | None = None):
        super().__init__(message)
        self.disruptions = disruptions or []


class RetryableUserCodeError(PathwaysError):
    """A user-code failure the DAG asked to retry (``retry_user_errors=True``)."""

    def __init__(self, message: str, *, exit_code: int | None = None):
        super().__init__(message)
        self.exit_code = exit_code


class BenchmarkRegressionError(PathwaysError, AirflowFailException):
    """A watched benchmark metric is worse than its recent baseline by more than its threshold.

    The numbers would be the same on a retry, so Airflow does not retry it. The run is already
    recorded (flagged) in the history when this is raised; ``result`` is the task's would-be XCom.
    """

    def __init__(
        self,
        message: str,
        *,
        regressions: tuple[str, ...] | list[str] = (),
        report_uri: str | None = None,
        result: dict | None = None,
    ):
        super().__init__(message)
        self.regressions = tuple(regressions)
        self.report_uri = report_uri
        self.result = result or {}


class CheckpointLookupError(PathwaysError):
    """The checkpoint directory could not be read for too long while the task was deferred."""


class AirflowApiError(PathwaysError):
    """Airflow's REST API cannot answer the janitor: a wrong URL, a refused token, or an outage."""
