"""The provider alone: its operators and sensors load without the testing distribution, and register nothing of it.

``pathways-airflow-testing`` (the local cluster, its pytest plugin, the demo, the CRD checks) is
installed here, as in every development environment; the checks below hide it from a fresh
interpreter, or read the provider's own metadata, to see what an install without the ``testing``
extra gets.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import distribution, requires

import pytest
from packaging.requirements import Requirement

import pathways_airflow
from pathways_airflow.extensions import CLI_GROUP, CRDS_GROUP, INSTALL_HINT

TESTING_MODULES = ("pathways_airflow_testing", "pathways_airflow.testing")

# Runs in an isolated interpreter (-I: no user site, no PYTHONPATH, no current directory). A finder
# first on sys.meta_path records every attempt to import testing code and fails it, as a missing
# distribution would; then the provider's public modules are imported.
_WITHOUT_TESTING = """
import importlib.abc, json, sys

PREFIXES = {prefixes!r}
attempts = []

class NoTesting(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == p or name.startswith(p + ".") for p in PREFIXES):
            attempts.append(name)
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NoTesting())
import pathways_airflow, pathways_airflow.operators, pathways_airflow.sensors
import pathways_airflow.hooks, pathways_airflow.triggers, pathways_airflow.cli
from pathways_airflow.operators import *
from pathways_airflow.sensors import *
loaded = sorted(m for m in sys.modules if any(m == p or m.startswith(p + ".") for p in PREFIXES))
provider_attempts = list(attempts)
try:
    import pathways_airflow.testing
    shim = "imported"
except ImportError as error:
    shim = str(error)
print(json.dumps({{"attempts": provider_attempts, "loaded": loaded, "shim": shim, "shim_attempts": attempts}}))
"""


def run_without_testing() -> dict:
    code = _WITHOUT_TESTING.format(prefixes=("pathways_airflow_testing",))
    result = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def without_testing() -> dict:
    return run_without_testing()


def test_operators_and_sensors_import_no_testing_code(without_testing):
    assert without_testing["attempts"] == []
    assert without_testing["loaded"] == []


def test_the_shim_names_the_extra_when_the_testing_distribution_is_missing(without_testing):
    assert INSTALL_HINT in without_testing["shim"]
    assert without_testing["shim_attempts"] == ["pathways_airflow_testing"]


def test_the_shim_re_exports_the_local_cluster_when_installed():
    import pathways_airflow_testing
    from pathways_airflow import testing

    assert testing.LocalCluster is pathways_airflow_testing.LocalCluster
    assert set(testing.__all__) == set(pathways_airflow_testing.__all__)


def test_the_provider_registers_no_pytest_plugin_and_no_testing_entry_point():
    groups = {entry.group for entry in distribution("pathways-airflow").entry_points}
    assert groups == {"apache_airflow_provider", "airflow.plugins", "console_scripts"}  # airflow.plugins: the UI view
    testing = {(entry.group, entry.name): entry.value for entry in distribution("pathways-airflow-testing").entry_points}
    assert testing[("pytest11", "pathways_airflow_testing")] == "pathways_airflow_testing.pytest_plugin"
    assert {group for group, _ in testing} == {"pytest11", CLI_GROUP, CRDS_GROUP}


def test_the_testing_distributions_entry_points_load(pytestconfig):
    for entry in distribution("pathways-airflow-testing").entry_points:
        assert entry.load() is not None, entry
    assert pytestconfig.pluginmanager.has_plugin("pathways_airflow_testing")


def test_only_the_testing_extra_installs_the_testing_distribution():
    required = [Requirement(r) for r in requires("pathways-airflow") or ()]
    testing = [r for r in required if r.name == "pathways-airflow-testing"]
    assert testing and all(r.marker is not None and r.marker.evaluate({"extra": "testing"}) for r in testing)
    assert not any(r.marker.evaluate({"extra": "plots"}) for r in testing)


def test_both_distributions_are_released_at_one_version():
    import pathways_airflow_testing

    assert pathways_airflow_testing.__version__ == pathways_airflow.__version__
    assert distribution("pathways-airflow-testing").version == distribution("pathways-airflow").version


def test_the_worker_image_installs_the_provider_without_testing_code():
    import re
    from pathlib import Path

    dockerfile = (Path(__file__).resolve().parents[2] / "docker" / "Dockerfile").read_text()
    install = re.search(r"^RUN pip install (.+)$", dockerfile, re.M)
    assert install and "/opt/pathways-airflow[plots]" in install.group(1)
    assert "testing" not in install.group(1)
    copied = re.findall(r"^COPY (?:--\S+ )*(.+) \S+$", dockerfile, re.M)
    assert not any(source.startswith("packages") for sources in copied for source in sources.split())
