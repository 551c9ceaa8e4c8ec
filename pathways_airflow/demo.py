"""``pathways-airflow demo``: what a training task would submit, for both backends, checked.

It builds the workload a scheduled MaxText training task would run (2 × v5e 2x4 slices), renders
it as a PathwaysJob and as a JobSet, writes both manifests, prints what they ask of the cluster,
and shows that bad input is refused before anything could be submitted. With ``--crds`` (or
``$PATHWAYS_AIRFLOW_CRDS``) the manifests are also validated strictly against those CRDs.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pathways_airflow.spec import InvalidWorkloadSpec, TaskIdentity, build_workload, render
from pathways_airflow.spec.render import BACKENDS

SAMPLE = {
    "tpu": "v5e",
    "topology": "2x4",
    "num_slices": 2,
    "pathways_dir": "gs://demo-bucket/pathways",
    "image": "us-docker.pkg.dev/demo-project/maxtext/maxtext:latest",
    "command": [
        "python3",
        "-m",
        "MaxText.train",
        "MaxText/configs/base.yml",
        "base_output_directory=gs://demo-bucket/runs",
        "run_name=llama-demo",
        "steps=1000",
        "checkpoint_period=100",
    ],
    "max_restarts": 2,
    "queue_name": "multislice-queue",
}


def demo_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="render and check a sample training workload")
    parser.add_argument("--out", default="demo-output", help="where to write the manifests")
    parser.add_argument("--crds", action="append", metavar="PATH", help="CRD YAML file or directory")
    parser.set_defaults(run=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from pathways_airflow.cli import manifest_yaml

    crd_paths = args.crds or ([os.environ["PATHWAYS_AIRFLOW_CRDS"]] if os.environ.get("PATHWAYS_AIRFLOW_CRDS") else [])
    validator = None
    if crd_paths:
        from pathways_airflow.crds import SchemaValidator

        validator = SchemaValidator.from_paths(crd_paths)

    workload = build_workload(**SAMPLE)
    identity = TaskIdentity("pathways_training", "train", "scheduled__2026-11-22T00:00:00+00:00")
    name = identity.workload_name()
    shape = workload.shape
    print(
        f"workload {name}: {workload.num_slices} × {shape.machine_type.description} {shape.topology} "
        f"slices = {workload.total_chips} chips on {shape.vms * workload.num_slices} TPU VMs "
        f"({shape.vms} per slice, {shape.chips_per_vm} chips each), Kueue queue {workload.queue_name}"
    )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    failures = 0
    for backend in BACKENDS:
        manifest = render(
            workload,
            backend=backend,
            name=name,
            namespace="default",
            labels=identity.labels(),
            annotations=identity.annotations(),
        )
        path = out / f"{backend}.yaml"
        path.write_text(manifest_yaml(manifest))
        verdict = "not checked against a CRD (pass --crds)"
        if validator is not None:
            errors = validator.errors(manifest)
            failures += bool(errors)
            verdict = "valid against its CRD" if not errors else "INVALID: " + "; ".join(errors)
        print(f"  {manifest['kind']:<12} {path}  {verdict}")
        if backend == "jobset":
            rules = manifest["spec"]["failurePolicy"].get("rules", [])
            for rule in rules:
                print(f"    failure rule {rule['name']}: {rule['action']} on {rule['onJobFailureReasons']}")

    print("bad input is refused before submission:")
    try:
        build_workload(**{**SAMPLE, "topology": "3x3", "num_slices": 0})
    except InvalidWorkloadSpec as error:
        print("  " + str(error).replace("\n", "\n  "))
    return 1 if failures else 0
