"""The serving engines an inference task can deploy, by name, and the default. Pure.

vLLM is the default: JetStream's repository is archived (read-only since 2026-02-01, its README
pointing to tpu-inference), MaxText now serves its checkpoints through vLLM's model plugin, and a
team starting today gets the engine that is maintained. ``engine="jetstream"`` keeps existing
JetStream DAGs and images running.
"""

from __future__ import annotations

from typing import Any

from pathways_airflow.spec import jetstream, vllm
from pathways_airflow.spec.engine import Engine
from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem

ENGINES: dict[str, Engine] = {engine.name: engine for engine in (vllm.ENGINE, jetstream.ENGINE)}
DEFAULT_ENGINE = vllm.NAME


def engine_named(name: Any) -> Engine:
    """The engine called ``name``; ``InvalidWorkloadSpec`` naming the choices otherwise."""
    engine = ENGINES.get(name) if isinstance(name, str) else None
    if engine is None:
        raise InvalidWorkloadSpec([SpecProblem("engine", name, "not a serving engine", tuple(ENGINES))])
    return engine


__all__ = ["DEFAULT_ENGINE", "ENGINES", "engine_named"]
