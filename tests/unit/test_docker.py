"""The image recipe: CI cannot run a Docker engine, so it checks the recipe's install step itself."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def dockerfile_install_args() -> list[str]:
    text = (REPO / "docker" / "Dockerfile").read_text()
    match = re.search(r"^RUN pip install (.+)$", text, re.M)
    assert match, "docker/Dockerfile has no 'RUN pip install' line"
    return shlex.split(match.group(1))


def test_dockerfile_builds_on_the_official_airflow_image():
    text = (REPO / "docker" / "Dockerfile").read_text()
    assert re.search(r"^FROM apache/airflow:3\.3\.2-python3\.11$", text, re.M)
    copied = re.findall(r"^COPY (?:--\S+ )*(.+) \S+$", text, re.M)
    for sources in copied:
        for source in sources.split():
            assert (REPO / source).exists(), f"Dockerfile copies {source}, which does not exist"


def test_the_dockerfile_install_line_resolves_against_this_checkout(tmp_path):
    """Resolve (without installing) exactly what the image's pip line asks for."""
    args = [a.replace("/opt/pathways-airflow", str(REPO)) for a in dockerfile_install_args()]
    args = [a for a in args if a != "--no-cache-dir"]
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--report", str(tmp_path / "r.json"), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
