"""The ``pathways-airflow`` command.

``pathways-airflow render`` prints the manifest a workload would be submitted as, for either
backend, so it can be reviewed or piped to ``kubectl apply -f -`` without Airflow. The command
line after ``--`` is the main container's command::

    pathways-airflow render --tpu v5e --topology 2x4 --num-slices 2 \\
        --pathways-dir gs://my-bucket/pathways --image us-docker.pkg.dev/me/maxtext:latest \\
        -- python3 -m MaxText.train MaxText/configs/base.yml steps=100

With ``pathways-airflow-testing`` installed (the ``testing`` extra), ``local-cluster`` and
``demo`` are subcommands too, and ``render --crds`` checks the manifest against CRD schemas; the
provider alone has ``render`` only (see :mod:`pathways_airflow.extensions`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

import yaml

from pathways_airflow.extensions import CLI_GROUP, CRDS_GROUP, INSTALL_HINT, extensions
from pathways_airflow.spec import InvalidWorkloadSpec, build_workload, render
from pathways_airflow.spec.errors import SpecProblem
from pathways_airflow.spec.names import name_problem
from pathways_airflow.spec.render import BACKENDS
from pathways_airflow.spec.tpu import MACHINE_TYPES
from pathways_airflow.spec.workload import COMPONENT_TYPES, DEPLOYMENT_MODES


class _NoAliasDumper(yaml.SafeDumper):
    """Write repeated values out in full: ``kubectl`` users should never meet YAML anchors."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def manifest_yaml(manifest: dict) -> str:
    return yaml.dump(manifest, Dumper=_NoAliasDumper, sort_keys=False, default_flow_style=False)


def _pairs(values: Sequence[str] | None, flag: str) -> list[tuple[str, str]]:
    pairs = []
    for value in values or ():
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise InvalidWorkloadSpec([SpecProblem(flag, value, "must be KEY=VALUE")])
        pairs.append((key, rest))
    return pairs


def _custom_components(images: list[tuple[str, str]], flags: list[tuple[str, str]]) -> list[dict]:
    components: dict[str, dict] = {}
    for kind, image in images:
        components.setdefault(kind, {"component_type": kind})["image"] = image
    for kind, flag in flags:
        components.setdefault(kind, {"component_type": kind}).setdefault("flags", []).append(flag)
    return list(components.values())


def render_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "render",
        help="print the manifest of a workload (PathwaysJob or JobSet)",
        description="Print the manifest a workload would be submitted as. Everything after -- is "
        "the main container's command.",
    )
    parser.add_argument("--backend", choices=BACKENDS, default="pathwaysjob")
    parser.add_argument("--name", default="pathways-job", help="workload name (≤ 22 characters)")
    parser.add_argument("--namespace", default="default")
    tpu = parser.add_argument_group("TPU slices")
    tpu.add_argument("--tpu", help="generation shorthand: v4, v5e, v5p, v6e, tpu7x")
    tpu.add_argument("--machine-type", choices=sorted(MACHINE_TYPES))
    tpu.add_argument("--topology", required=True)
    tpu.add_argument("--num-slices", type=int, default=1)
    tpu.add_argument("--reservation")
    tpu.add_argument("--spot", action="store_true")
    tpu.add_argument("--node-selector", action="append", metavar="KEY=VALUE")
    pathways = parser.add_argument_group("Pathways")
    pathways.add_argument("--pathways-dir", required=True, help="gs:// scratch location")
    pathways.add_argument("--pathways-version")
    pathways.add_argument("--deployment-mode", choices=DEPLOYMENT_MODES, default="default")
    pathways.add_argument("--max-restarts", type=int, default=0)
    pathways.add_argument("--max-slice-restarts", type=int)
    pathways.add_argument("--elastic-slices", type=int)
    pathways.add_argument(
        "--custom-image", action="append", metavar="COMPONENT=IMAGE", help=f"COMPONENT in {COMPONENT_TYPES}"
    )
    pathways.add_argument("--custom-flag", action="append", metavar="COMPONENT=FLAG")
    main = parser.add_argument_group("main container")
    main.add_argument("--image", help="main container image; omit for a headless workload")
    main.add_argument("--env", action="append", metavar="NAME=VALUE")
    main.add_argument("--service-account")
    kueue = parser.add_argument_group("Kueue and metadata")
    kueue.add_argument("--queue-name")
    kueue.add_argument("--priority-class")
    kueue.add_argument("--label", action="append", metavar="KEY=VALUE")
    parser.add_argument(
        "--crds",
        action="append",
        metavar="PATH",
        help="CRD YAML file or directory: also validate the manifest against it (strict; needs the testing extra)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the main container's command")
    parser.set_defaults(run=run_render)


def run_render(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        problem = name_problem(args.name)
        if problem:
            raise InvalidWorkloadSpec([problem])
        workload = build_workload(
            tpu=args.tpu,
            machine_type=args.machine_type,
            topology=args.topology,
            num_slices=args.num_slices,
            pathways_dir=args.pathways_dir,
            pathways_version=args.pathways_version,
            deployment_mode=args.deployment_mode,
            max_restarts=args.max_restarts,
            max_slice_restarts=args.max_slice_restarts,
            elastic_slices=args.elastic_slices,
            custom_components=_custom_components(
                _pairs(args.custom_image, "--custom-image"), _pairs(args.custom_flag, "--custom-flag")
            ),
            image=args.image,
            command=command or None,
            env=dict(_pairs(args.env, "--env")),
            service_account_name=args.service_account,
            reservation=args.reservation,
            spot=args.spot,
            node_selector=dict(_pairs(args.node_selector, "--node-selector")),
            queue_name=args.queue_name,
            priority_class=args.priority_class,
            labels=dict(_pairs(args.label, "--label")),
        )
    except InvalidWorkloadSpec as error:
        print(f"pathways-airflow: {error}", file=sys.stderr)
        return 2
    manifest = render(workload, backend=args.backend, name=args.name, namespace=args.namespace)
    if args.crds:
        validators = extensions(CRDS_GROUP)
        if not validators:
            print(f"pathways-airflow: --crds needs pathways-airflow-testing: {INSTALL_HINT}", file=sys.stderr)
            return 2
        errors = validators[0].load().from_paths(args.crds).errors(manifest)
        if errors:
            print("pathways-airflow: the manifest does not match its CRD:", file=sys.stderr)
            for line in errors:
                print(f"  {line}", file=sys.stderr)
            return 1
    sys.stdout.write(manifest_yaml(manifest))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pathways-airflow", description="Pathways workloads on GKE TPU slices, from Airflow."
    )
    subparsers = parser.add_subparsers(dest="subcommand", required=True)
    render_parser(subparsers)
    for subcommand in extensions(CLI_GROUP):
        subcommand.load()(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
