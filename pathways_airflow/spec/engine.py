"""What a serving engine is to the provider: the questions an inference task asks of it. Pure.

The operators never name an engine's ports, containers, flags or result format; they ask the
:class:`Engine` of the server they deploy. Each engine is one module
(:mod:`pathways_airflow.spec.jetstream`, :mod:`pathways_airflow.spec.vllm`) that fills one in;
:mod:`pathways_airflow.spec.engines` lists them and picks the default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pathways_airflow.spec.errors import SpecProblem

ServerChecks = Callable[[list[SpecProblem], Mapping[str, Any]], None]
"""Adds a problem for each server input the engine cannot run with (inputs by parameter name)."""


@dataclass(frozen=True)
class Engine:
    """One serving engine: how to deploy it, probe it, benchmark it and read its result."""

    name: str
    """As written in ``engine=``, and recorded with each benchmark's metrics."""
    container: str
    """The container that runs the model server: its crash fails the start-up, its log is quoted."""
    http_port: int
    health_path: str
    """``GET`` on ``http_port`` answers 200 once the model is loaded."""
    not_yet_serving: frozenset[int]
    """HTTP statuses of the health check (through the service proxy) that mean "still loading"."""
    benchmark_port: int
    """The port the benchmark Job talks to."""
    default_image: str
    runs_without_pathways: bool
    """Whether the server can run on a one-VM slice by itself, without the Pathways proxy."""
    check_server: ServerChecks
    server_args: Callable[[list[SpecProblem], Any], tuple[str, ...]]
    """The user's extra server arguments, checked (the ones the engine sets itself are refused)."""
    serving_containers: Callable[[Any], list[dict[str, Any]]]
    """From a :class:`~pathways_airflow.spec.serving.InferenceServer`: the containers of the server pod besides the Pathways proxy and resource manager; the first
    is :attr:`container`, which holds the TPUs when the server runs without Pathways."""
    service_ports: tuple[Mapping[str, Any], ...]
    datasets: tuple[str, ...]
    datasets_without_path: tuple[str, ...]
    """Datasets of generated prompts, the first being the default when a DAG names none."""
    datasets_refusing_path: tuple[str, ...]
    """Datasets whose benchmark fails when given a ``--dataset-path``."""
    default_benchmark_entry_point: str
    benchmark_model: str
    """The operator parameter naming the model the benchmark asks the server for."""
    owned_benchmark_flags: frozenset[str]
    """Benchmark flags the operator sets from its own parameters."""
    benchmark_argv: Callable[[Any, str], list[str]]
    """From a :class:`~pathways_airflow.spec.benchmark.BenchmarkRun`: the benchmark's command (unquoted) against a server host, saving its result locally."""
    saved_result: str
    """The local file :attr:`benchmark_argv` saves the result JSON to (a glob for JetStream)."""
    upload_result: Callable[[str], str]
    """The shell command that copies :attr:`saved_result` to a ``gs://`` URI, quoted."""
    read_metrics: Callable[[Any, str], dict[str, Any]]
    """The metrics from the result JSON (``source`` names it in errors); ``ValueError`` if unreadable."""
    supports_max_concurrency: bool = False


__all__ = ["Engine", "ServerChecks"]
