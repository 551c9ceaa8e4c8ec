"""The ready-made retry policy routes our typed exceptions."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pathways_airflow import exceptions
from pathways_airflow.retry import PATHWAYS_RETRY_POLICY, RETRY_POLICIES_EXIST, RETRY_POLICY_KWARGS

if RETRY_POLICIES_EXIST:
    from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction
else:
    from enum import Enum

    class RetryAction(Enum):  # type: ignore[no-redef]  # only names the parameters below
        FAIL = "fail"
        RETRY = "retry"
        DEFAULT = "default"

needs_retry_policies = pytest.mark.skipif(not RETRY_POLICIES_EXIST, reason="retry policies are Airflow 3.3+")


@pytest.mark.parametrize(
    ("error", "action", "delay"),
    [
        (exceptions.UserCodeError("bug", exit_code=1), RetryAction.FAIL, None),
        (exceptions.BadSpecError("bad"), RetryAction.FAIL, None),
        (exceptions.WorkloadDeletedError("kubectl delete pathwaysjob train-0"), RetryAction.FAIL, None),
        (exceptions.RetryableUserCodeError("flaky", exit_code=1), RetryAction.RETRY, timedelta(minutes=1)),
        (exceptions.DisruptionBudgetExhausted("too many"), RetryAction.RETRY, timedelta(minutes=30)),
        (exceptions.InfrastructureError("slice lost"), RetryAction.RETRY, timedelta(minutes=2)),
        (exceptions.KubernetesApiError("api down"), RetryAction.RETRY, timedelta(minutes=2)),
        (ValueError("other"), RetryAction.DEFAULT, None),
    ],
)
@needs_retry_policies
def test_each_failure_gets_its_decision(error, action, delay):
    decision = PATHWAYS_RETRY_POLICY.evaluate(error, try_number=1, max_tries=3)
    assert decision.action is action and decision.retry_delay == delay


@needs_retry_policies
def test_the_policy_round_trips_through_dag_serialization():
    restored = ExceptionRetryPolicy.deserialize(PATHWAYS_RETRY_POLICY.serialize())
    assert restored.evaluate(exceptions.InfrastructureError("x"), 1, 3).action is RetryAction.RETRY


def test_deterministic_failures_are_airflow_fail_exceptions():
    from airflow.providers.common.compat.sdk import AirflowFailException

    assert issubclass(exceptions.UserCodeError, AirflowFailException)
    assert issubclass(exceptions.BadSpecError, AirflowFailException)
    assert issubclass(exceptions.WorkloadDeletedError, AirflowFailException), "a person deleting it meant stop"
    assert not issubclass(exceptions.RetryableUserCodeError, AirflowFailException)
    assert not issubclass(exceptions.DisruptionBudgetExhausted, AirflowFailException)


def test_the_kwargs_carry_the_policy_exactly_where_airflow_has_retry_policies():
    import airflow.sdk

    has_them = hasattr(airflow.sdk, "ExceptionRetryPolicy")
    assert RETRY_POLICIES_EXIST is has_them
    assert RETRY_POLICY_KWARGS == ({"retry_policy": PATHWAYS_RETRY_POLICY} if has_them else {})
    assert (PATHWAYS_RETRY_POLICY is None) is (not has_them)


def test_an_operator_accepts_the_kwargs_on_every_airflow_line():
    from pathways_airflow.operators import PathwaysJobOperator

    op = PathwaysJobOperator(
        task_id="t", tpu="v5e", topology="2x4", pathways_dir="gs://bucket/p", image="img", command=["true"],
        retries=2, **RETRY_POLICY_KWARGS,
    )
    assert op.retries == 2
    if RETRY_POLICIES_EXIST:
        assert op.retry_policy is PATHWAYS_RETRY_POLICY
