"""The ``pathways-airflow`` command.

``pathways-airflow render`` prints the manifest a workload would be submitted as, for either
backend, so it can be reviewed or piped to ``kubectl apply -f -`` without Airflow. The command
line after ``--`` is the main container's command::

    pathways-airflow render --tpu v5e --topology 2x4 --num-slices 2 \\
        --pathways-dir gs://my-bucket/pathways --image us-docker.pkg.dev/me/maxtext:latest \\
        -- python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml steps=100

``pathways-airflow janitor`` lists the workloads labelled as ours, asks Airflow's REST API about
their task instances and (with ``--delete``) deletes those Airflow has lost track of::

    AIRFLOW_API_TOKEN=... pathways-airflow janitor --airflow-url https://airflow.example.com --all-namespaces

With ``pathways-airflow-testing`` installed (the ``testing`` extra), ``local-cluster`` and
``demo`` are subcommands too, and ``render --crds`` checks the manifest against CRD schemas; the
provider alone has ``render`` only (see :mod:`pathways_airflow.extensions`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import yaml

from pathways_airflow.extensions import CLI_GROUP, CRDS_GROUP, INSTALL_HINT, extensions
from pathways_airflow.spec import InvalidWorkloadSpec, build_workload, render
from pathways_airflow.spec.arguments import namespace_problem
from pathways_airflow.spec.errors import SpecProblem
from pathways_airflow.spec.engines import DEFAULT_ENGINE, engine_named
from pathways_airflow.spec.manifest import manifest_objects, read_manifest, read_server_manifest, supervise, supervise_server
from pathways_airflow.spec.serving import SERVICE_SUFFIX
from pathways_airflow.spec.names import name_problem
from pathways_airflow.spec.render import BACKENDS, XPK_SYSTEM_EXIT_CODES
from pathways_airflow.spec.tpu import MACHINE_TYPES
from pathways_airflow.spec.workload import COMPONENT_TYPES, DEPLOYMENT_MODES
from pathways_airflow.state.janitor import GRACE_PERIOD, report_line, sweep_summary


TTL_SECONDS_AFTER_FINISHED = 86_400
"""What ``PathwaysJobOperator`` adds to a JobSet that has none (its ``ttl_seconds_after_finished`` default)."""


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
    tpu.add_argument("--topology", help="required without --manifest")
    tpu.add_argument("--num-slices", type=int, default=1)
    tpu.add_argument("--reservation")
    tpu.add_argument("--spot", action="store_true")
    tpu.add_argument("--node-selector", action="append", metavar="KEY=VALUE")
    pathways = parser.add_argument_group("Pathways")
    pathways.add_argument("--pathways-dir", help="gs:// scratch location (required without --manifest)")
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
    parser.add_argument(
        "--manifest",
        metavar="FILE",
        help="a PathwaysJob or JobSet you already have (gcluster --dry-run-out, xpk --output-manifest-file), or a "
        "serving LeaderWorkerSet: print it as the operator would submit it, and on stderr what was added or changed "
        "and why; of the other flags only --queue-name, --main-container, --engine, --crds and --namespace (when the "
        "manifest names none) apply",
    )
    parser.add_argument("--main-container", help="with --manifest: the container that runs the program (or the server)")
    parser.add_argument("--engine", default=DEFAULT_ENGINE, help="with a LeaderWorkerSet --manifest: the engine it serves with")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the main container's command")
    parser.set_defaults(run=run_render)


def _supervised(args: argparse.Namespace) -> list[dict]:
    """``--manifest``: the file as the operator would submit it (its own name kept); the changes on stderr."""
    text = Path(args.manifest).read_text()
    if any(d.get("kind") == "LeaderWorkerSet" for d in manifest_objects(text)):
        return _supervised_server(args, text)
    user = read_manifest(text, main_container=args.main_container)
    name = str((user.manifest.get("metadata") or {}).get("name") or args.name)
    namespace = (user.manifest.get("metadata") or {}).get("namespace") or args.namespace
    manifest, changes = supervise(
        user, name=name, namespace=namespace, labels={}, annotations={}, queue_name=args.queue_name,
        ttl_seconds_after_finished=TTL_SECONDS_AFTER_FINISHED, system_exit_codes=XPK_SYSTEM_EXIT_CODES,
    )
    print(f"{args.manifest}: {user.manifest['kind']}, {user.num_slices} × {user.shape.machine_type.name} {user.shape.topology}, "
          f"program in {user.main_job}/{user.main_container}; supervised:", file=sys.stderr)
    _print_changes(changes)
    return [manifest]


def _supervised_server(args: argparse.Namespace, text: str) -> list[dict]:
    server = read_server_manifest(text, engine=engine_named(args.engine), main_container=args.main_container)
    name, engine = server.name, server.engine
    objects, changes = supervise_server(
        server, name=name, service=f"{name}{SERVICE_SUFFIX}", namespace=server.namespace_for(args.namespace), labels={}, annotations={},
    )
    print(f"{args.manifest}: LeaderWorkerSet, {server.shape.machine_type.name} {server.shape.topology}, {engine.name} in "
          f"{engine.container}, health check GET {engine.health_path} on {engine.http_port}, benchmark port {engine.benchmark_port}; "
          "supervised:", file=sys.stderr)
    _print_changes(changes)
    return objects


def _print_changes(changes: tuple) -> None:
    for change in changes:
        print(f"  {change.line()}", file=sys.stderr)


def run_render(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.manifest:
        try:
            return _print_checked(_supervised(args), args)
        except (InvalidWorkloadSpec, OSError) as error:
            print(f"pathways-airflow: {error}", file=sys.stderr)
            return 2
    try:
        missing = [flag for flag, value in (("--topology", args.topology), ("--pathways-dir", args.pathways_dir)) if not value]
        if missing:
            raise InvalidWorkloadSpec([SpecProblem(flag, None, "is required (or give --manifest)") for flag in missing])
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
    return _print_checked([render(workload, backend=args.backend, name=args.name, namespace=args.namespace)], args)


def _print_checked(manifests: list[dict], args: argparse.Namespace) -> int:
    """Print the manifests (YAML documents); with ``--crds``, only once each custom resource matches its CRD."""
    if args.crds:
        validators = extensions(CRDS_GROUP)
        if not validators:
            print(f"pathways-airflow: --crds needs pathways-airflow-testing: {INSTALL_HINT}", file=sys.stderr)
            return 2
        validator = validators[0].load().from_paths(args.crds)
        errors = [line for manifest in manifests if manifest.get("apiVersion") != "v1" for line in validator.errors(manifest)]
        if errors:
            print("pathways-airflow: the manifest does not match its CRD:", file=sys.stderr)
            for line in errors:
                print(f"  {line}", file=sys.stderr)
            return 1
    sys.stdout.write("---\n".join(manifest_yaml(manifest) for manifest in manifests))
    return 0


def janitor_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "janitor",
        help="find (and with --delete, delete) workloads whose Airflow task instance is finished or gone",
        description="List the PathwaysJobs and JobSets labelled as pathways-airflow's, ask Airflow's REST API "
        "about the task instance each belongs to, and print one line per workload. A dry run unless --delete. "
        "The cluster is the current kubeconfig context (as kubectl), or --kubernetes-conn-id.",
    )
    parser.add_argument("--airflow-url", required=True, help="the api-server's base URL (without /api/v2)")
    parser.add_argument(
        "--token-env", default="AIRFLOW_API_TOKEN", metavar="NAME",
        help="environment variable holding the bearer token (default AIRFLOW_API_TOKEN); never printed",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--namespace", default="default")
    where.add_argument("--all-namespaces", action="store_true")
    parser.add_argument(
        "--grace-period", type=float, default=GRACE_PERIOD.total_seconds(), metavar="SECONDS",
        help="never delete a workload younger than this (default %(default).0f)",
    )
    parser.add_argument("--delete", action="store_true", help="delete the orphans (default: only print)")
    parser.add_argument("--wait", type=float, default=300.0, metavar="SECONDS", help="how long to wait for their pods to go")
    parser.add_argument("--kubernetes-conn-id", help="an Airflow Kubernetes connection instead of the kubeconfig")
    parser.set_defaults(run=run_janitor)


def run_janitor(args: argparse.Namespace) -> int:
    import datetime as dt
    import os

    from pathways_airflow.exceptions import PathwaysError
    from pathways_airflow.hooks.airflow_states import AirflowRestStates
    from pathways_airflow.hooks.janitor import sweep
    from pathways_airflow.hooks.pathways import PathwaysHook

    problems = [] if args.all_namespaces else list(filter(None, [namespace_problem(args.namespace)]))
    if args.grace_period < 0:
        problems.append(SpecProblem("--grace-period", args.grace_period, "must be 0 or more seconds"))
    if problems:
        print(f"pathways-airflow: {InvalidWorkloadSpec(problems)}", file=sys.stderr)
        return 2
    airflow = AirflowRestStates(args.airflow_url, os.environ.get(args.token_env))
    try:
        print(f"Airflow {airflow.check_reachable()} at {airflow.base_url}")
        result = sweep(
            PathwaysHook(kubernetes_conn_id=args.kubernetes_conn_id),
            None if args.all_namespaces else args.namespace,
            airflow.states,
            grace_period=dt.timedelta(seconds=args.grace_period),
            delete=args.delete,
            wait_seconds=args.wait,
        )
    except PathwaysError as error:
        print(f"pathways-airflow: {error}", file=sys.stderr)
        return 1
    finally:
        airflow.close()
    for verdict in result.verdicts:
        print(report_line(verdict, acting=args.delete))
    print(sweep_summary(result.verdicts, result.deleted, result.left, acting=args.delete))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pathways-airflow", description="Pathways workloads on GKE TPU slices, from Airflow."
    )
    subparsers = parser.add_subparsers(dest="subcommand", required=True)
    render_parser(subparsers)
    janitor_parser(subparsers)
    for subcommand in extensions(CLI_GROUP):
        subcommand.load()(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
