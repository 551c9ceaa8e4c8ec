"""How the hooks talk to the Kubernetes API: which failures are retried and how, what an answer must
look like, the path of an object, and how much of a log is kept.

Shared by :class:`~pathways_airflow.hooks.pathways.PathwaysHook` and its async twin, so both
retry the same failures the same way and refuse the same malformed answers.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Generator
from functools import lru_cache
from typing import Any, Mapping, TypedDict

import msgspec
from tenacity import RetryCallState, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential_jitter

from pathways_airflow.exceptions import KubernetesApiError
from pathways_airflow.resources import Resource
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem

TRANSIENT_STATUSES = frozenset({0, 408, 429, 500, 502, 503, 504})
API_OUTAGE_LIMIT_SECONDS = 30 * 60.0
"""How long a call, or a wait, rides out a Kubernetes API that keeps failing before it gives up (the
task's own deadline ends it sooner): long enough for a control-plane upgrade or a regional blip,
which on a zonal GKE cluster takes minutes while the workload's pods run on. A call that gave up
sooner would fail the task, or a wait's look, in the middle of a resubmission and leave the
workload to the janitor."""
MAX_ATTEMPTS = 11
"""Tries of one call for a caller with a retry loop of its own (a shared watch relisting, which
counts its failures and backs off itself): its waits double from :data:`FIRST_RETRY_SECONDS` to
:data:`MAX_RETRY_SECONDS`, about 80 s in all."""
FIRST_RETRY_SECONDS = 0.1
"""The first retry's wait. Most 5xx answers and dropped connections are blips (a load balancer's
hiccup, an API server's leader change): the first retries come quickly, because a disrupted
workload's next attempt may be waiting behind the call and every second of that is a second of
slices held or idle; a longer outage reaches the longer waits after a few tries."""
MAX_RETRY_SECONDS = 30.0
MAX_RETRY_AFTER = 60.0
LOG_LINE_CHARS = 2_000
REQUEST_TIMEOUT = 60.0
"""Seconds a request may take before the client gives up on it (then retried as a timeout)."""


# --- retries --------------------------------------------------------------------------------


def status_of(error: BaseException) -> int | None:
    status = getattr(error, "status", None)
    return status if isinstance(status, int) else None


def is_transient(error: BaseException) -> bool:
    """Worth retrying: throttling, server errors, dropped or refused connections, timeouts."""
    status = status_of(error)
    # The clients raise subclasses for some statuses (ServiceException for every 5xx,
    # NotFoundException, ...): look for ApiException anywhere in the class hierarchy.
    if status is not None and any(cls.__name__ == "ApiException" for cls in type(error).__mro__):
        return status in TRANSIENT_STATUSES
    import urllib3

    try:
        import aiohttp

        network_errors: tuple[type[BaseException], ...] = (aiohttp.ClientError,)
    except ImportError:  # pragma: no cover - aiohttp ships with the async client
        network_errors = ()
    return isinstance(error, (ConnectionError, TimeoutError, asyncio.TimeoutError, urllib3.exceptions.HTTPError, *network_errors))


def retry_after_seconds(error: BaseException | None) -> float | None:
    """The server's ``Retry-After`` for a 429 or 503, in seconds (capped), if it sent one."""
    headers = getattr(error, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    if value is None:
        return None
    try:
        return min(MAX_RETRY_AFTER, max(0.0, float(value)))
    except (TypeError, ValueError):
        return None


def _wait(state: RetryCallState) -> float:
    """The server's ``Retry-After`` if it sent one, else the doubling backoff, read from the
    constants above at each retry (so a test cluster running faster than real time may scale them)."""
    error = state.outcome.exception() if state.outcome else None
    honoured = retry_after_seconds(error)
    if honoured is not None:
        return honoured
    return wait_exponential_jitter(initial=FIRST_RETRY_SECONDS, max=MAX_RETRY_SECONDS, jitter=FIRST_RETRY_SECONDS)(state)


def retry_options(log: Any, attempts: int | None = None, outage_seconds: float | None = None) -> dict[str, Any]:
    """Tenacity's options for one API call: transient failures retried with backoff until the API
    has failed for ``outage_seconds`` (by default :data:`API_OUTAGE_LIMIT_SECONDS`), or ``attempts``
    tries in all (1: a read whose answer is only nice to have, or whose caller looks again anyway,
    fails at once instead of waiting)."""
    limit = API_OUTAGE_LIMIT_SECONDS if outage_seconds is None else outage_seconds
    of = f"/{attempts - 1}" if attempts is not None else f" (giving up after {limit:.0f} s of failures)"

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        log.warning(
            "Kubernetes API call failed (%s); retry %d%s in %.1fs",
            describe(error), state.attempt_number, of, state.next_action.sleep if state.next_action else 0,
        )

    return {
        "retry": retry_if_exception(is_transient),
        "wait": _wait,
        "stop": stop_after_attempt(attempts) if attempts is not None else stop_after_delay(limit),
        "reraise": True,
        "before_sleep": before_sleep,
    }


def describe(error: BaseException | None) -> str:
    status = status_of(error) if error else None
    reason = getattr(error, "reason", None)
    return f"HTTP {status} {reason or ''}".strip() if status else repr(error)


# --- the request both clients send, and what a 404 means ------------------------------------


def call_options(
    query: Mapping[str, Any] | None = None, body: Any = None, content_type: str = "application/json", timeout: float | None = REQUEST_TIMEOUT
) -> dict[str, Any]:
    """The keyword arguments of ``ApiClient.call_api`` after ``(path, method)``, the same for the
    ``kubernetes`` and ``kubernetes_asyncio`` clients: query values as the API reads them (booleans
    lower-case, ``None`` left out), JSON in and out, the body unread (the caller reads it whole)."""
    return {
        "query_params": [(k, str(v).lower() if isinstance(v, bool) else v) for k, v in (query or {}).items() if v is not None],
        "header_params": {"Accept": "application/json", "Content-Type": content_type},
        "body": body,
        "auth_settings": ["BearerToken"],
        "_preload_content": False,
        "_return_http_data_only": True,
        "_request_timeout": timeout,
    }


def log_query(container: str, lines: int, max_bytes: int, previous: bool = False) -> dict[str, Any]:
    """The query of a container's log tail: at most ``lines`` lines and ``max_bytes`` bytes."""
    return {"container": container, "tailLines": lines, "limitBytes": max_bytes, "previous": previous or None}


def absent(error: BaseException, answer: Any = None, *, uid: str | None = None) -> Any:
    """``answer`` when ``error`` is the API's 404 (the object is not there: an answer, not a
    failure), or, for a request made on the object of ``uid`` only, its 409 (a precondition
    failed: that object is gone and another holds its name); any other error is raised again.
    Called from an ``except`` block of either hook."""
    if status_of(error) == 404 or (uid is not None and status_of(error) == 409):
        return answer
    raise error


def json_body(method: str, path: str, data: bytes, shape: type | None = None) -> Any:
    """A response's JSON (of each object only the fields of ``shape``, :func:`decoded`), or a
    ``KubernetesApiError`` saying what came instead.

    A proxy or load balancer in front of the API server may answer 200 with an HTML page, or cut
    the body short: that is an API failure, reported as one, not a ``JSONDecodeError``.
    """
    if not data:
        return None
    try:
        return decoded(data, shape)  # a list of pods is megabytes: decoded as fast as a watch line
    except (ValueError, RecursionError):
        text = data[:200].decode("utf-8", errors="replace")
        raise KubernetesApiError(f"{method} {path}: the answer is not JSON: {text!r}") from None


def an_object(method: str, path: str, body: Any) -> dict[str, Any]:
    """The object a GET answered with. ``None`` means "not found" to callers, so an empty or
    non-object 200 answer must never pass for one: it is an API failure."""
    if not isinstance(body, dict):
        raise KubernetesApiError(f"{method} {path}: the answer is not an object: {str(body)[:200]!r}")
    return body


def api_error_message(error: BaseException) -> str:
    """The ``Status`` message of an API error, for messages users read."""
    body = getattr(error, "body", None)
    if body:
        try:
            return json.loads(body).get("message") or str(body)
        except (TypeError, ValueError):
            return str(body)
    return describe(error)


_decoder = msgspec.json.Decoder()
"""JSON to Python objects, and newline-delimited JSON in one call with blank lines skipped: msgspec
(a dependency of Airflow's own core and Task SDK on every supported line) decodes a watch event
about twice as fast as ``json.loads`` and without a Python call per line."""


@lru_cache(maxsize=None)
def _decoder_of(shape: type | None) -> msgspec.json.Decoder:
    return _decoder if shape is None else msgspec.json.Decoder(shape)


def decoded(data: bytes, shape: type | None = None) -> Any:
    """``data`` decoded; with a ``shape`` (a ``TypedDict``), its objects only as far as the shape names.

    A pod is kilobytes of JSON of which a wait reads a few hundred bytes: msgspec skips the
    fields a shape leaves out without making a Python object of them, so a pod watch event
    decodes ~5× faster, into half the memory (``tests/unit/test_pruning.py``), and a list's
    pages leave no heap of discarded templates behind. Text that does not fit the shape (an
    object where a list was, a ``null`` metadata) is decoded whole instead, for the caller to
    judge as it judges any malformed object.
    """
    try:
        return _decoder_of(shape).decode(data)
    except msgspec.ValidationError:
        return _decoder.decode(data)


@lru_cache(maxsize=None)
def list_of(shape: type | None) -> type | None:
    """A list response (``apiVersion``, ``kind``, ``metadata``, ``items``) whose items are of ``shape``."""
    if shape is None:
        return None
    return TypedDict(f"{shape.__name__}List", {"apiVersion": Any, "kind": Any, "metadata": Any, "items": list[shape]}, total=False)  # type: ignore[operator, valid-type]


@lru_cache(maxsize=None)
def event_of(shape: type | None) -> type | None:
    """A watch event (``type``, ``object``) whose object is of ``shape``: the shape of an ``ERROR``
    event's ``Status`` must name its ``code`` and ``message``, which the watch reads."""
    if shape is None:
        return None
    return TypedDict(f"{shape.__name__}Event", {"type": Any, "object": shape}, total=False)  # type: ignore[operator, valid-type]


class JsonLines:
    """Newline-delimited JSON (a watch stream) from its chunks, in time linear in the bytes read.

    A chunk may hold thousands of events (a fast cluster's burst) or a fraction of one (a large
    object): each byte is searched once, joined at most once and decoded once, never re-copied
    per line. Decoding is most of what a triggerer's watches cost (a pod is kilobytes of JSON);
    with a ``shape``, each line is decoded as :func:`decoded` decodes a body.
    """

    def __init__(self, shape: type | None = None) -> None:
        self._pending: list[bytes] = []
        self._typed = _decoder_of(shape).decode_lines

    def feed(self, chunk: bytes) -> list[Any]:
        """The whole lines ``chunk`` completes, parsed; the rest waits for the next chunk."""
        end = chunk.rfind(b"\n")
        if end < 0:
            self._pending.append(chunk)
            return []
        complete = b"".join((*self._pending, chunk[:end])) if self._pending else chunk[:end]
        rest = chunk[end + 1 :]
        self._pending = [rest] if rest else []
        try:
            return self._typed(complete)
        except msgspec.ValidationError:
            return _decoder.decode_lines(complete)


def object_path(resource: Resource, namespace: str | None, name: Any, subresource: str | None = None) -> str:
    """The URL of one object; refuses a name that would address something else.

    Names are quoted into one path segment, but ``.`` and ``..`` are path segments of their own
    (a client or proxy normalising the URL would turn a DELETE of ``..`` into a DELETE of the
    collection), and an empty name addresses the collection itself. Kubernetes never names an
    object so, so such a name is a caller's bug: refused before any request.
    """
    if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "%" in name:
        raise InvalidWorkloadSpec([SpecProblem("name", name, "is not a Kubernetes object name")])
    if namespace is not None and (not isinstance(namespace, str) or namespace in ("", ".", "..") or "/" in namespace):
        raise InvalidWorkloadSpec([SpecProblem("namespace", namespace, "is not a Kubernetes namespace name")])
    return resource.path(namespace, name, subresource)


LOG_TAIL_BYTES = 64 * 1024
"""At most this much of a container's log is read for a tail (the API's ``limitBytes``): one line
can be megabytes (a dumped tensor, a config), and a tail goes into trigger events, exception
messages and the task log."""


LOG_START_BYTES = 64 * 1024
"""What is read of the start of a program's log to learn where it resumed: MaxText says it as it
restores, after it has printed its configuration (one line per setting: tens of KiB)."""


def whole_lines(body: bytes, max_bytes: int) -> list[str]:
    """The lines of a log's first ``max_bytes``: a last line the limit cut is left out."""
    lines = body.decode("utf-8", errors="replace").split("\n")
    return lines[:-1] if len(body) >= max_bytes else [line for line in lines if line]


def tail_windows(lines: int) -> Generator[int, str, list[str]]:
    """Which ``tailLines`` to ask for, until the answer holds the end of the log: a generator sent
    each answer's text, returning the tail (:func:`bounded_tail`).

    The API keeps the *first* ``limitBytes`` of the lines selected, so a window holding a few
    megabyte lines (a dumped array, an HLO) answers with their beginnings and never reaches the
    exception after them. An answer as long as the limit was cut: the window is halved until one
    comes back whole, the largest such (at most ``log2(lines) + 1`` reads, each bounded). When even
    the last line alone is longer than the limit, its beginning is what there is.
    """
    fits, cut, best, asked = 0, lines + 1, "", lines
    while True:
        text = yield asked
        if len(text.encode("utf-8", errors="replace")) < LOG_TAIL_BYTES - 4:  # a split character may re-encode shorter
            fits, best = asked, text
        else:
            cut, best = asked, best if fits else text
        if cut - fits <= 1:
            return bounded_tail(best, lines)
        asked = (fits + cut) // 2


def bounded_tail(text: str, lines: int) -> list[str]:
    """The last ``lines`` lines of ``text``, each cut to ``LOG_LINE_CHARS`` characters with a note
    of how much was left out (the bytes were already bounded by the request's ``limitBytes``)."""
    return [
        line if len(line) <= LOG_LINE_CHARS else f"{line[:LOG_LINE_CHARS]}… ({len(line) - LOG_LINE_CHARS} more characters)"
        for line in text.splitlines()[-lines:]
    ]
