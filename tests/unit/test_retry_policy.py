"""The ready-made retry policy routes our typed exceptions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction

from pathways_airflow import exceptions
from pathways_airflow.retry import PATHWAYS_RETRY_POLICY


@pytest.mark.parametrize(
    ("error", "action", "delay"),
    [
        (exceptions.UserCodeError("bug", exit_code=1), RetryAction.FAIL, None),
        (exceptions.BadSpecError("bad"), RetryAction.FAIL, None),
        (exceptions.RetryableUserCodeError("flaky", exit_code=1), RetryAction.RETRY, timedelta(minutes=1)),
        (exceptions.DisruptionBudgetExhausted("too many"), RetryAction.RETRY, timedelta(minutes=30)),
        (exceptions.InfrastructureError("slice lost"), RetryAction.RETRY, timedelta(minutes=2)),
        (exceptions.KubernetesApiError("api down"), RetryAction.RETRY, timedelta(minutes=2)),
        (ValueError("other"), RetryAction.DEFAULT, None),
    ],
)
def test_each_failure_gets_its_decision(error, action, delay):
    decision = PATHWAYS_RETRY_POLICY.evaluate(error, try_number=1, max_tries=3)
    assert decision.action is action and decision.retry_delay == delay


def test_the_policy_round_trips_through_dag_serialization():
    restored = ExceptionRetryPolicy.deserialize(PATHWAYS_RETRY_POLICY.serialize())
    assert restored.evaluate(exceptions.InfrastructureError("x"), 1, 3).action is RetryAction.RETRY


def test_deterministic_failures_are_airflow_fail_exceptions():
    from airflow.sdk.exceptions import AirflowFailException

    assert issubclass(exceptions.UserCodeError, AirflowFailException)
    assert issubclass(exceptions.BadSpecError, AirflowFailException)
    assert not issubclass(exceptions.RetryableUserCodeError, AirflowFailException)
    assert not issubclass(exceptions.DisruptionBudgetExhausted, AirflowFailException)
