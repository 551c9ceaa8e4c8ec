"""Which exception a failed batch Job raises: one rule for every Job the provider runs. Pure.

A conversion Job and a benchmark Job fail the same ways, and Airflow must treat the same failure
the same way in both. The rule is the workloads' (xpk's): a disrupted pod, or exit code 42 or
127–255 (killed, out of memory, lost), or no exit code at all (the pod was gone before it could
record one: preempted, its node lost), is the system's, and a retry may succeed; any other
non-zero code is the program's (a wrong ``model_name``, a mismatched config, a bad flag), and
retrying it runs the same bug again.
"""

from __future__ import annotations

from collections.abc import Collection

from pathways_airflow.exceptions import InfrastructureError, UserCodeError
from pathways_airflow.spec.render import XPK_SYSTEM_EXIT_CODES


def failed_job_exception(
    message: str, *, exit_code: int | None, disruption: str | None, system_exit_codes: Collection[int] = XPK_SYSTEM_EXIT_CODES
) -> Exception:
    """``UserCodeError`` (not retried) for the program's own failure, else ``InfrastructureError``."""
    if disruption is None and exit_code not in (None, 0) and exit_code not in system_exit_codes:
        return UserCodeError(message, exit_code=exit_code)
    return InfrastructureError(message)
