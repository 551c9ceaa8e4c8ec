"""Which API errors are worth retrying, with the exception classes the real clients raise."""

from __future__ import annotations

import asyncio

import kubernetes.client.exceptions as sync_errors
import kubernetes_asyncio.client.exceptions as async_errors
import pytest
import urllib3

from pathways_airflow.hooks.pathways import is_transient


@pytest.mark.parametrize("errors", [sync_errors, async_errors], ids=["kubernetes", "kubernetes_asyncio"])
@pytest.mark.parametrize(
    "name, status, transient",
    [
        ("ApiException", 429, True),
        ("ApiException", 500, True),
        # every 5xx arrives as ServiceException, a subclass: still a server error worth retrying
        ("ServiceException", 500, True),
        ("ServiceException", 503, True),
        ("ServiceException", 504, True),
        ("NotFoundException", 404, False),
        ("ForbiddenException", 403, False),
        ("UnauthorizedException", 401, False),
        ("ApiException", 409, False),
        ("ApiException", 422, False),
    ],
)
def test_api_errors_are_retried_for_throttling_and_server_errors_only(errors, name, status, transient):
    if not hasattr(errors, name):  # the status subclasses came with kubernetes 35 / kubernetes_asyncio 35
        pytest.skip(f"{errors.__name__} of this version raises ApiException itself, not {name}")
    assert is_transient(getattr(errors, name)(status=status, reason="x")) is transient


@pytest.mark.parametrize(
    "error",
    [ConnectionResetError(), TimeoutError(), asyncio.TimeoutError(), urllib3.exceptions.ProtocolError("dropped")],
)
def test_dropped_connections_and_timeouts_are_retried(error):
    assert is_transient(error)


def test_a_bug_in_our_code_is_not_retried():
    assert not is_transient(KeyError("status"))


def test_a_blip_costs_a_tenth_of_a_second_and_an_outage_is_ridden_out_for_half_an_hour(monkeypatch):
    """The waits tenacity sleeps between the tries of one call, with its own retry machinery and a
    clock that moves as it sleeps: the first within 0.2 s (a disrupted workload's next attempt may
    wait behind the call), doubling to 30 s, until the API has failed for the outage limit (a
    zonal control plane's upgrade takes minutes); a caller with its own loop asks for a count of
    tries instead; a ``Retry-After`` is honoured as asked."""
    import logging
    import types

    import tenacity

    from pathways_airflow.hooks.api import API_OUTAGE_LIMIT_SECONDS, MAX_ATTEMPTS, retry_options

    clock = [1000.0]
    monkeypatch.setattr(tenacity, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))

    def slept_through(error: BaseException, **options) -> list[float]:
        sleeps: list[float] = []

        def sleep(seconds: float) -> None:
            sleeps.append(seconds)
            clock[0] += seconds

        def always() -> None:
            raise error

        with pytest.raises(type(error)):
            tenacity.Retrying(**retry_options(logging.getLogger("test"), **options), sleep=sleep)(always)
        return sleeps

    sleeps = slept_through(ConnectionResetError())
    assert 0.1 <= sleeps[0] <= 0.2 and 0.2 <= sleeps[1] <= 0.3 and max(sleeps) <= 30.1
    assert API_OUTAGE_LIMIT_SECONDS <= sum(sleeps) <= API_OUTAGE_LIMIT_SECONDS + 30.1
    assert 120.0 <= sum(slept_through(ConnectionResetError(), outage_seconds=120.0)) <= 150.1
    counted = slept_through(ConnectionResetError(), attempts=MAX_ATTEMPTS)
    assert len(counted) == MAX_ATTEMPTS - 1 and 60 <= sum(counted) <= 100
    assert slept_through(ConnectionResetError(), attempts=1) == []
    throttled = sync_errors.ApiException(status=429, reason="Too Many Requests")
    throttled.headers = {"Retry-After": "2"}
    assert slept_through(throttled, attempts=MAX_ATTEMPTS) == [2.0] * (MAX_ATTEMPTS - 1)


def _kubelet(lines: list[str]):
    """The log endpoint's selection: the last ``tailLines`` lines, then the first ``limitBytes`` of them."""
    from pathways_airflow.hooks.api import LOG_TAIL_BYTES

    asked: list[int] = []

    def answer(tail: int) -> str:
        asked.append(tail)
        return "".join(f"{line}\n" for line in lines[-tail:]).encode()[:LOG_TAIL_BYTES].decode(errors="replace")

    return answer, asked


def _read(lines: list[str], window: int = 30) -> tuple[list[str], list[int]]:
    from pathways_airflow.hooks.api import tail_windows

    answer, asked = _kubelet(lines)
    windows = tail_windows(window)
    tail = next(windows)
    try:
        while True:
            tail = windows.send(answer(tail))
    except StopIteration as done:
        return done.value, asked


def test_a_log_tail_holds_the_end_of_the_log_however_long_the_lines_before_it():
    short = [f"completed step: {i}" for i in range(100)]
    assert _read(short) == (short[-30:], [30])  # one read when the window fits
    dumped = [*short, *(f"tensor {i}: " + "9" * 3_000_000 for i in range(3)), "Traceback (most recent call last):", "ValueError: bad"]
    tail, asked = _read(dumped)
    assert tail == ["Traceback (most recent call last):", "ValueError: bad"] and len(asked) <= 6
    tail, _ = _read([*short, "RuntimeError: " + "x" * 200_000])
    assert len(tail) == 1 and tail[0].startswith("RuntimeError: xxx") and tail[0].endswith("more characters)")
