"""Node pools of a GKE cluster with TPU slices, as Node objects with GKE's real labels. Pure.

A TPU node pool is one slice: its nodes are the slice's VMs (chips in the topology / chips per
VM), each labelled with the accelerator, the topology and the node pool, tainted
``google.com/tpu=present:NoSchedule`` and offering ``google.com/tpu`` chips, as GKE creates them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from pathways_airflow.spec.tpu import MACHINE_TYPES, slice_shape

NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
SPOT_LABEL = "cloud.google.com/gke-spot"
RESERVATION_LABEL = "cloud.google.com/reservation-name"
SCHEDULED_MAINTENANCE_LABEL = "cloud.google.com/scheduled-maintenance-time"
ACTIVE_MAINTENANCE_LABEL = "cloud.google.com/active-node-maintenance"
PERFORM_MAINTENANCE_LABEL = "cloud.google.com/perform-maintenance"  # GKE's manual start of announced maintenance
IMPENDING_TERMINATION_TAINT = "cloud.google.com/impending-node-termination"
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"  # kubernetes/api core/v1/well_known_taints.go
TPU_RESOURCE = "google.com/tpu"
TPU_TAINT = {"key": TPU_RESOURCE, "value": "present", "effect": "NoSchedule"}


@dataclass(frozen=True)
class NodePool:
    """One GKE node pool: a TPU slice (``topology`` set) or CPU nodes."""

    name: str
    machine_type: str
    topology: str | None = None
    nodes: int | None = None
    spot: bool = False
    reservation: str | None = None

    @property
    def is_tpu(self) -> bool:
        return self.topology is not None

    def node_count(self) -> int:
        if self.is_tpu:
            return slice_shape(MACHINE_TYPES[self.machine_type], self.topology or "").vms
        return self.nodes or 1

    def node_names(self) -> list[str]:
        return [f"gke-local-{self.name}-{index}" for index in range(self.node_count())]


def tpu_pool(name: str, machine_type: str, topology: str, *, spot: bool = False, reservation: str | None = None) -> NodePool:
    if machine_type not in MACHINE_TYPES:
        raise ValueError(f"machine_type={machine_type!r}: not a TPU machine type; valid: {', '.join(MACHINE_TYPES)}")
    slice_shape(MACHINE_TYPES[machine_type], topology)  # raises for a topology GKE would refuse
    return NodePool(name, machine_type, topology, spot=spot, reservation=reservation)


def default_node_pools() -> list[NodePool]:
    """A CPU pool for Pathways heads and servers, three v5e 2x4 slices and two v6e 4x4 slices."""
    return [
        NodePool("default-pool", "n2-standard-64", nodes=3),
        *(tpu_pool(f"tpu-v5e-2x4-{i}", "ct5lp-hightpu-4t", "2x4") for i in range(3)),
        *(tpu_pool(f"tpu-v6e-4x4-{i}", "ct6e-standard-4t", "4x4") for i in range(2)),
    ]


def node_manifests(pool: NodePool, zone: str = "us-central2-b") -> list[dict[str, Any]]:
    """The Node objects GKE would register for ``pool``."""
    labels = {
        NODEPOOL_LABEL: pool.name,
        "node.kubernetes.io/instance-type": pool.machine_type,
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": zone.rsplit("-", 1)[0],
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    capacity = {"cpu": "64", "memory": "256Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    taints: list[dict[str, str]] = []
    if pool.is_tpu:
        machine = MACHINE_TYPES[pool.machine_type]
        labels[ACCELERATOR_LABEL] = machine.accelerator
        labels[TOPOLOGY_LABEL] = pool.topology or ""
        capacity = {"cpu": "224", "memory": "720Gi", "pods": "110", "ephemeral-storage": "100Gi", TPU_RESOURCE: str(machine.chips_per_vm)}
        taints.append(dict(TPU_TAINT))
    if pool.spot:
        labels[SPOT_LABEL] = "true"
    if pool.reservation:
        labels[RESERVATION_LABEL] = pool.reservation
    nodes = []
    for name in pool.node_names():
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": {**labels, "kubernetes.io/hostname": name}},
                "spec": {"taints": [dict(t) for t in taints]} if taints else {},
                "status": {
                    "capacity": dict(capacity),
                    "allocatable": dict(capacity),
                    "conditions": [
                        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
                    ],
                    "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
                    "nodeInfo": {
                        "architecture": "amd64",
                        "bootID": f"boot-{name}",
                        "containerRuntimeVersion": "containerd://1.7.24",
                        "kernelVersion": "6.6.56+",
                        "kubeProxyVersion": "v1.32.4-gke.local",
                        "kubeletVersion": "v1.32.4-gke.local",
                        "machineID": f"machine-{name}",
                        "operatingSystem": "linux",
                        "osImage": "Container-Optimized OS from Google",
                        "systemUUID": f"uuid-{name}",
                    },
                },
            }
        )
    return nodes


def pools_of(nodes: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Nodes grouped by node pool label."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        grouped.setdefault(node["metadata"].get("labels", {}).get(NODEPOOL_LABEL, ""), []).append(node)
    return grouped
