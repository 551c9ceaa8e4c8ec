"""How a benchmark's failure is reported, and which pods a server's deletion waits for (pure)."""

from __future__ import annotations

from pathways_airflow.exceptions import InfrastructureError, UserCodeError
from pathways_airflow.resources import JOB, LEADERWORKERSET, SERVICE
from pathways_airflow.state.jobs import FAILED, JobOutcome
from pathways_airflow.run.messages import benchmark_failed, quoted_container_log, server_crashed, server_timed_out
from pathways_airflow.state.serving import ContainerExit, pod_selectors

BACKOFF = JobOutcome(FAILED, "BackoffLimitExceeded", "Job has reached the specified backoff limit")


def test_a_benchmark_that_crashed_on_its_own_is_the_programs_failure():
    crash = ContainerExit("b-bench-x1", "benchmark", 3)
    error = benchmark_failed("serving", "b-bench", BACKOFF, crash, None, quoted_container_log(["boom"], crash.pod, "benchmark"))
    assert isinstance(error, UserCodeError) and error.exit_code == 3
    assert str(error).startswith(
        "benchmark Job serving/b-bench failed (BackoffLimitExceeded: Job has reached the specified backoff limit): "
        "container benchmark of pod b-bench-x1 exited with code 3."
    )
    assert "  | boom" in str(error)


def test_a_benchmark_lost_to_the_system_may_be_retried():
    preempted = benchmark_failed("serving", "b-bench", BACKOFF, None, "DisruptionTarget: PreemptionByScheduler", "")
    assert isinstance(preempted, InfrastructureError) and not isinstance(preempted, UserCodeError)
    assert "no container exit code was recorded (DisruptionTarget: PreemptionByScheduler)" in str(preempted)
    killed = benchmark_failed("serving", "b-bench", BACKOFF, ContainerExit("p", "benchmark", 137), None, "")
    assert isinstance(killed, InfrastructureError) and not isinstance(killed, UserCodeError)
    lost = benchmark_failed("serving", "b-bench", BACKOFF, None, None, "")
    assert isinstance(lost, InfrastructureError) and not isinstance(lost, UserCodeError)


def test_a_server_crash_is_final_and_a_slow_start_is_not():
    crash = ContainerExit("s-0", "jax-tpu", 1, "Error", restarted=True)
    crashed = server_crashed("serving", "s", crash, quoted_container_log([], "s-0", "jax-tpu", on_gke=True))
    assert isinstance(crashed, UserCodeError) and crashed.exit_code == 1
    assert "exited with code 1 (Error) while starting" in str(crashed)
    assert "could not be read (see the Cloud Logging link of this cluster)" in str(crashed)
    slow = server_timed_out("serving", "s", 60, "1/3 pods running", 3, "")
    assert isinstance(slow, InfrastructureError) and not isinstance(slow, UserCodeError)
    assert "startup_timeout=60s: 1/3 pods running. The group was recreated 2 time(s)." in str(slow)


def test_only_the_pods_of_leaderworkersets_and_jobs_are_waited_for():
    assert pod_selectors([(LEADERWORKERSET, "s"), (SERVICE, "s-svc"), (JOB, "s-bench")]) == [
        "leaderworkerset.sigs.k8s.io/name=s",
        "batch.kubernetes.io/job-name=s-bench",
    ]
