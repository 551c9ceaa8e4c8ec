"""A ready-made ``retry_policy`` for TPU tasks: retry infrastructure, never deterministic bugs.

Use it on any pathways-airflow task (``retry_policy=PATHWAYS_RETRY_POLICY``, with ``retries`` set):

* a user's bug (``UserCodeError``), a spec the cluster refuses (``BadSpecError``,
  ``ForeignWorkloadError``) and a benchmark regression (``BenchmarkRegressionError``) derive
  from ``AirflowFailException`` and fail at once anyway;
* ``RetryableUserCodeError`` (``retry_user_errors=True``) retries after a minute;
* a spent disruption budget (``DisruptionBudgetExhausted``) retries after 30 minutes — by then the
  maintenance window is usually over — and infrastructure errors (``InfrastructureError``,
  ``WorkloadDeletedError``, ``KubernetesApiError``) after 2 minutes;
* anything else follows the task's own retry settings.

A retry never runs a second workload: the operator re-attaches to a live one, or deletes a
finished one before submitting the next attempt.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.sdk import ExceptionRetryPolicy, RetryRule
from airflow.sdk.definitions.retry_policy import RetryAction

PATHWAYS_RETRY_POLICY = ExceptionRetryPolicy(
    rules=[
        RetryRule(
            exception=[
                "pathways_airflow.exceptions.UserCodeError",
                "pathways_airflow.exceptions.BadSpecError",
                "pathways_airflow.exceptions.ForeignWorkloadError",
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
                "pathways_airflow.exceptions.WorkloadDeletedError",
                "pathways_airflow.exceptions.KubernetesApiError",
            ],
            action=RetryAction.RETRY,
            retry_delay=timedelta(minutes=2),
        ),
    ],
    default=RetryAction.DEFAULT,
)
