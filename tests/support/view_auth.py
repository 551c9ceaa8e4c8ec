"""An auth manager for the Pathways view's tests: Airflow's Simple auth manager, with one user kept out of some DAGs.

The Simple auth manager gives every role read access to every DAG, so a user who cannot read one
DAG needs a rule of its own: ``outsider`` (any role) may not touch the DAGs named in
``PATHWAYS_VIEW_DENIED_DAGS`` (comma-separated). Everything else, login, tokens and the other
users, is the Simple auth manager's. The api-server loads it by name (``[core] auth_manager``).
"""

from __future__ import annotations

import os
from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

OUTSIDER = "outsider"
DENIED_DAGS_VARIABLE = "PATHWAYS_VIEW_DENIED_DAGS"


def denied_dags() -> set[str]:
    return {name for name in os.environ.get(DENIED_DAGS_VARIABLE, "").split(",") if name}


class OneOutsiderAuthManager(SimpleAuthManager):
    """The Simple auth manager, except that :data:`OUTSIDER` may not read or change the denied DAGs."""

    def is_authorized_dag(self, **kwargs: Any) -> bool:
        details = kwargs.get("details")
        if kwargs["user"].get_name() == OUTSIDER and (details is None or details.id is None or details.id in denied_dags()):
            return False
        return super().is_authorized_dag(**kwargs)
