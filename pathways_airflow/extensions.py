"""What the ``pathways-airflow-testing`` distribution adds to the provider, found by entry point.

The provider never imports testing code: the local cluster's ``local-cluster`` and ``demo``
subcommands (group ``pathways_airflow.cli``) and the CRD checks behind ``render --crds`` (group
``pathways_airflow.crds``) are entry points that distribution declares, so an environment with the
provider alone has none of them and loads nothing of it.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

INSTALL_HINT = "pip install 'pathways-airflow[testing]'"
"""How to get the local cluster, the demo and the CRD checks: the one line every message gives."""

CLI_GROUP = "pathways_airflow.cli"
"""Callables ``add(subparsers)`` that each add one subcommand to ``pathways-airflow``."""

CRDS_GROUP = "pathways_airflow.crds"
"""A class with ``from_paths(paths)`` and ``errors(manifest) -> list[str]`` (the CRD schema checks)."""


def extensions(group: str) -> list[EntryPoint]:
    """The entry points of ``group`` in this environment, by name (empty without the testing extra)."""
    return sorted(entry_points(group=group), key=lambda entry: entry.name)
