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
    assert listed("operators") == modules_defining("pathways_airflow.operators", {"BaseOperator"}) - modules_defining(
        "pathways_airflow.operators", {"BaseSensorOperator"}
    )
    assert listed("sensors") == modules_defining("pathways_airflow.sensors", {"BaseSensorOperator"})
    assert listed("hooks") == modules_defining("pathways_airflow.hooks", {"BaseHook"})
    assert listed("triggers") == modules_defining("pathways_airflow.triggers", {"BaseTrigger"})


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
