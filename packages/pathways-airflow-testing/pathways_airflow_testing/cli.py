"""``pathways-airflow local-cluster``: run the local cluster in the foreground until interrupted."""

from __future__ import annotations

import argparse
import shutil
import signal
import threading


def local_cluster_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "local-cluster",
        help="run a local GKE + Pathways cluster (Kubernetes API, controllers, GCS emulator)",
        description="Run the local cluster until interrupted. Prints the kubeconfig path, the API "
        "server and the GCS endpoint. Scenarios: POST /_local/scenarios/<name> with JSON arguments.",
    )
    parser.add_argument("--speed", type=float, default=1.0, help="simulated seconds per real second")
    parser.add_argument("--crds", action="append", metavar="PATH", help="CRD YAML file or directory (schema checks)")
    parser.add_argument("--rbac", action="store_true", help="enforce RBAC for non-admin tokens")
    parser.add_argument("--kubeconfig-out", metavar="PATH", help="also write the kubeconfig here")
    parser.set_defaults(run=run_local_cluster)


def run_local_cluster(args: argparse.Namespace) -> int:
    from pathways_airflow_testing import LocalCluster

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with LocalCluster(crds=args.crds, speed=args.speed, rbac=args.rbac) as cluster:
        kubeconfig = cluster.kubeconfig
        if args.kubeconfig_out:
            shutil.copyfile(cluster.kubeconfig, args.kubeconfig_out)
            kubeconfig = args.kubeconfig_out
        print(f"kubeconfig:   {kubeconfig}")
        print(f"api server:   {cluster.server}")
        print(f"gcs endpoint: {cluster.gcs_endpoint}")
        print()
        print(f"  export KUBECONFIG={kubeconfig}")
        print(f"  export STORAGE_EMULATOR_HOST={cluster.gcs_endpoint}")
        print("  kubectl get nodes -L cloud.google.com/gke-nodepool")
        print(
            f"  curl -X POST -H 'Authorization: Bearer {cluster.token}' "
            f"{cluster.server}/_local/scenarios/maintenance -d '{{\"node_pool\": \"tpu-v5e-2x4-0\"}}'"
        )
        print("\nrunning; Ctrl-C to stop", flush=True)
        stop.wait()
    return 0
