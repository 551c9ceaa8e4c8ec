"""pathways-airflow: run Pathways workloads on GKE TPU slices from Apache Airflow."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_INTEGRATION = "Pathways on GKE"


def get_provider_info() -> dict[str, Any]:
    """What Airflow's providers manager reads through the ``apache_airflow_provider`` entry point.

    Lists every operator, sensor, hook, trigger and extra link module of the package; a test
    keeps it in step with the modules that exist.
    """
    return {
        "package-name": "pathways-airflow",
        "name": "Pathways on GKE",
        "description": "Run Pathways workloads (PathwaysJob / JobSet) on GKE TPU slices: submit, "
        "wait on slice readiness and checkpoints, ride out TPU maintenance",
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": _INTEGRATION,
                "external-doc-url": "https://cloud.google.com/ai-hypercomputer/docs/workloads/pathways-on-cloud/pathways-intro",
                "tags": ["gcp", "software"],
            }
        ],
        "operators": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "pathways_airflow.operators.conversion",
                    "pathways_airflow.operators.delete",
                    "pathways_airflow.operators.inference",
                    "pathways_airflow.operators.teardown",
                    "pathways_airflow.operators.janitor",
                    "pathways_airflow.operators.regression",
                    "pathways_airflow.operators.workload",
                ],
            }
        ],
        "sensors": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "pathways_airflow.sensors.checkpoint",
                    "pathways_airflow.sensors.slices",
                    "pathways_airflow.sensors.workload",
                ],
            }
        ],
        "hooks": [{"integration-name": _INTEGRATION, "python-modules": ["pathways_airflow.hooks.pathways"]}],
        "triggers": [
            {
                "integration-name": _INTEGRATION,
                "python-modules": [
                    "pathways_airflow.triggers.checkpoint",
                    "pathways_airflow.triggers.checkpoint_event",
                    "pathways_airflow.triggers.job",
                    "pathways_airflow.triggers.slices",
                    "pathways_airflow.triggers.workload",
                ],
            }
        ],
        "extra-links": ["pathways_airflow.links.GkeWorkloadLink", "pathways_airflow.links.CloudLoggingLink"],
        "plugins": [{"name": "pathways", "plugin-class": "pathways_airflow.ui.plugin.PathwaysViewPlugin"}],
    }
