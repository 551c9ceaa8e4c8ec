"""A ready-made ``retry_policy`` for TPU tasks: retry infrastructure, never deterministic bugs.

Use it on any pathways-airflow task (``retry_policy=PATHWAYS_RETRY_POLICY``, with ``retries`` set):

* a user's bug (``UserCodeError``), a spec the cluster refuses (``BadSpecError``,
  ``ForeignWorkloadError``), a workload someone deleted (``WorkloadDeletedError``: they meant
  stop), a permission RBAC does not grant (``PermissionMissingError``) and a benchmark regression (``BenchmarkRegressionError``) derive from
  ``AirflowFailException`` and fail at once anyway;
* ``RetryableUserCodeError`` (``retry_user_errors=True``) retries after a minute;
* a spent disruption budget (``DisruptionBudgetExhausted``) retries after 30 minutes — by then the
  maintenance window is usually over — and infrastructure errors (``InfrastructureError``,
  ``KubernetesApiError``) after 2 minutes;
* anything else follows the task's own retry settings.

A retry never runs a second workload: the operator re-attaches to a live one, or deletes a
finished one before submitting the next attempt.

Retry policies exist from Airflow 3.3. This module imports on every supported line: below 3.3,
``PATHWAYS_RETRY_POLICY`` is ``None`` and ``RETRY_POLICY_KWARGS`` is empty, so a DAG written as
``PathwaysJobOperator(..., **RETRY_POLICY_KWARGS)`` parses and runs everywhere. What is lost
there is only the per-exception delay: the deterministic failures above still fail at once
(``AirflowFailException``), and everything else follows the task's ``retries``/``retry_delay``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

try:
    from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction, RetryRule
except ImportError:  # Airflow < 3.3
    ExceptionRetryPolicy = None  # type: ignore[assignment,misc]

RETRY_POLICIES_EXIST = ExceptionRetryPolicy is not None
"""Whether this Airflow has per-task retry policies (3.3+)."""


def _pathways_retry_policy() -> Any:
    return ExceptionRetryPolicy(
        rules=[
            RetryRule(
                exception=[
                    "pathways_airflow.exceptions.UserCodeError",
                    "pathways_airflow.exceptions.BadSpecError",
                    "pathways_airflow.exceptions.ForeignWorkloadError",
                    "pathways_airflow.exceptions.WorkloadDeletedError",
                    "pathways_airflow.exceptions.PermissionMissingError",
                    "pathways_airflow.exceptions.BenchmarkRegressionError",
                ],
                action=RetryAction.FAIL,
            ),
            RetryRule(
                exception="pathways_airflow.exceptions.RetryableUserCodeError",
                action=RetryAction.RETRY,
                retry_delay=timedelta(minutes=1),
            ),
            RetryRule(
                exception="pathways_airflow.exceptions.DisruptionBudgetExhausted",
                action=RetryAction.RETRY,
                retry_delay=timedelta(minutes=30),
            ),
            RetryRule(
                exception=[
                    "pathways_airflow.exceptions.InfrastructureError",
                    "pathways_airflow.exceptions.KubernetesApiError",
                ],
                action=RetryAction.RETRY,
                retry_delay=timedelta(minutes=2),
            ),
        ],
        default=RetryAction.DEFAULT,
    )


PATHWAYS_RETRY_POLICY: Any = _pathways_retry_policy() if RETRY_POLICIES_EXIST else None
"""The policy (Airflow 3.3+), or ``None`` where Airflow has no retry policies."""

RETRY_POLICY_KWARGS: dict[str, Any] = {"retry_policy": PATHWAYS_RETRY_POLICY} if RETRY_POLICIES_EXIST else {}
"""``**RETRY_POLICY_KWARGS`` on an operator: the policy where it exists, nothing where it does not
(an operator below 3.3 refuses an unknown ``retry_policy`` argument)."""
