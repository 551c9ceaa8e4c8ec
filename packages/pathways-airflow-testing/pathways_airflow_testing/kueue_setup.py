"""The Kueue objects a fresh local cluster starts with: every TPU slice as quota. Pure.

One ResourceFlavor per (accelerator, topology) of the TPU node pools, one ClusterQueue
``cluster-queue`` whose ``google.com/tpu`` quota is all the chips of those pools, and a
LocalQueue ``multislice-queue`` in ``default`` — the layout of GKE's multislice tutorial.
"""

from __future__ import annotations

from typing import Any, Sequence

from pathways_airflow.spec.tpu import MACHINE_TYPES, slice_shape
from pathways_airflow_testing.nodes import ACCELERATOR_LABEL, TOPOLOGY_LABEL, NodePool

KUEUE_API = "kueue.x-k8s.io/v1beta2"
CLUSTER_QUEUE = "cluster-queue"
LOCAL_QUEUE = "multislice-queue"


def flavor_name(accelerator: str, topology: str) -> str:
    return f"{accelerator}-{topology}".replace("_", "-").lower()


def default_queue_objects(pools: Sequence[NodePool], namespace: str = "default") -> list[dict[str, Any]]:
    chips: dict[tuple[str, str], int] = {}
    for pool in pools:
        if not pool.is_tpu:
            continue
        machine = MACHINE_TYPES[pool.machine_type]
        shape = slice_shape(machine, pool.topology or "")
        key = (machine.accelerator, shape.topology)
        chips[key] = chips.get(key, 0) + shape.vms * machine.chips_per_vm
    flavors = [
        {
            "apiVersion": KUEUE_API,
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor_name(*key)},
            "spec": {"nodeLabels": {ACCELERATOR_LABEL: key[0], TOPOLOGY_LABEL: key[1]}},
        }
        for key in sorted(chips)
    ]
    cluster_queue = {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": CLUSTER_QUEUE},
        "spec": {
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [
                {
                    "coveredResources": ["google.com/tpu"],
                    "flavors": [
                        {"name": flavor_name(*key), "resources": [{"name": "google.com/tpu", "nominalQuota": total}]}
                        for key, total in sorted(chips.items())
                    ],
                }
            ],
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        },
    }
    local_queue = {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
        "spec": {"clusterQueue": CLUSTER_QUEUE},
    }
    return [*flavors, cluster_queue, local_queue] if chips else []
