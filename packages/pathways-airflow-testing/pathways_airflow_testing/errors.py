"""Kubernetes ``Status`` failures, raised anywhere in the cluster and answered as the API does."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A failed API call; ``body()`` is the ``Status`` object clients parse."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            status["details"] = self.details
        return status


def _details(group: str, plural: str, name: str | None) -> dict[str, Any]:
    details: dict[str, Any] = {"kind": plural}
    if group:
        details["group"] = group
    if name:
        details["name"] = name
    return details


def _resource(group: str, plural: str) -> str:
    return f"{plural}.{group}" if group else plural


def not_found(group: str, plural: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_resource(group, plural)} "{name}" not found', details=_details(group, plural, name))


def already_exists(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        409, "AlreadyExists", f'{_resource(group, plural)} "{name}" already exists', details=_details(group, plural, name)
    )


def conflict(group: str, plural: str, name: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_resource(group, plural)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        details=_details(group, plural, name),
    )


def invalid(group: str, kind: str, plural: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 Invalid with one cause per (field, message), like an admission or schema failure."""
    details = _details(group, plural, name)
    details["kind"] = kind
    details["causes"] = [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes]
    summary = ", ".join(f"{f}: {m}" for f, m in causes)
    return ApiError(422, "Invalid", f'{kind}.{group or "core"} "{name}" is invalid: {summary}', details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def gone(message: str = "too old resource version") -> ApiError:
    return ApiError(410, "Expired", message)


def forbidden(user: str, verb: str, group: str, plural: str, namespace: str | None, name: str | None) -> ApiError:
    scope = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
    target = f'{_resource(group, plural)} "{name}"' if name else _resource(group, plural)
    return ApiError(
        403,
        "Forbidden",
        f'{target} is forbidden: User "{user}" cannot {verb} resource "{plural}" in API group "{group}"{scope}',
        details=_details(group, plural, name),
    )


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def unsupported_media_type(message: str) -> ApiError:
    """415, as the API server answers a body in an encoding it does not read (a client that sent
    CBOR falls back to JSON on it)."""
    return ApiError(415, "UnsupportedMediaType", message)
