"""The real ``airflow api-server`` on a free port, over an existing AIRFLOW_HOME and database, with users who log in.

The view's tests need the server a person uses: the UI, the auth manager's login page and
tokens, and the plugins it mounts. It runs in its own process group (killed whole at the end),
its log in a file the failure messages quote. Users come from ``[core]
simple_auth_manager_users`` and a passwords file written beforehand, so a test knows every
password; the auth manager is :class:`tests.support.view_auth.OneOutsiderAuthManager`. Started by
the demo's own :func:`pathways_airflow_testing.demo.airflow_api_server`.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pathways_airflow_testing.demo import airflow_api_server
from tests.support.deployment import free_port
from tests.support.view_auth import DENIED_DAGS_VARIABLE

REPO = Path(__file__).resolve().parents[2]
AUTH_MANAGER = "tests.support.view_auth.OneOutsiderAuthManager"


@dataclass(frozen=True)
class Response:
    status: int
    body: Any


@dataclass
class ApiServer:
    url: str
    log: Path
    passwords: Mapping[str, str]

    def request(self, path: str, *, token: str | None = None, cookie: str | None = None,
                data: Any = None, method: str | None = None) -> Response:
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if cookie:
            headers["Cookie"] = f"_token={cookie}"
        body = None if data is None else json.dumps(data).encode()
        if body is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.url + path, data=body, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                status, raw = answer.status, answer.read()
        except urllib.error.HTTPError as error:
            status, raw = error.code, error.read()
        try:
            return Response(status, json.loads(raw))
        except ValueError:
            return Response(status, raw.decode(errors="replace"))

    def token(self, user: str) -> str:
        """A JWT for ``user``, from the auth manager's own token endpoint."""
        answer = self.request("/auth/token", data={"username": user, "password": self.passwords[user]}, method="POST")
        assert answer.status in (200, 201), f"no token for {user}: {answer}"
        return answer.body["access_token"]

    def log_tail(self, size: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-size:]


@contextmanager
def api_server(env: Mapping[str, str], users: Mapping[str, tuple[str, str]], denied_dags: list[str],
               workdir: Path, timeout: float = 120) -> Iterator[ApiServer]:
    """``airflow api-server`` with ``env`` (its AIRFLOW_HOME and database) and ``users``: name → (role, password)."""
    settings = {
        "PYTHONPATH": ":".join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p),
        "AIRFLOW__CORE__AUTH_MANAGER": AUTH_MANAGER,
        "AIRFLOW__API_AUTH__JWT_SECRET": "pathways-view-e2e-" + "0123456789abcdef" * 3,
        DENIED_DAGS_VARIABLE: ",".join(denied_dags),
    }
    with airflow_api_server(env, free_port(), workdir, users, settings, timeout=timeout) as (url, _):
        yield ApiServer(url, workdir / "api-server.log", {name: password for name, (_, password) in users.items()})
