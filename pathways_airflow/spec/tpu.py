"""The TPU catalog: machine type ↔ accelerator generation ↔ GKE labels ↔ topology ↔ chips and VMs.

The machine types are exactly the PathwaysJob CRD's ``workers[].type`` enum. The valid topologies
per machine type are the PathwaysJob controller's own table (``ValidTpuTopologiesMap``): the CRD
does not validate topologies, the controller fails the job at run time instead, so we check here,
before a slice is ever requested.

A slice's size follows from the topology: chips = product of its dimensions; one VM (one GKE node,
one Kubernetes pod of the ``worker`` job) holds ``chips_per_vm`` chips, so VMs per slice =
chips / chips_per_vm. A topology smaller than one VM (v6e ``1x1``) is one VM, and its worker pod
still requests ``chips_per_vm`` chips, as the controller does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from pathways_airflow.spec.errors import InvalidWorkloadSpec, SpecProblem

_V5P_TOPOLOGIES = (
    "2x2x1 2x2x2 2x2x4 2x4x4 4x4x4 4x4x8 4x4x12 4x8x8 4x4x20 4x8x12 4x4x28 8x8x8 4x12x12 4x8x20 "
    "4x4x44 8x8x12 4x4x52 4x8x28 4x12x20 8x8x16 4x4x68 8x12x12 4x4x76 8x8x20 4x12x28 4x8x44 "
    "4x4x92 8x12x16 4x20x20 4x8x52 12x12x12 8x8x28 4x4x116 8x12x20 4x4x124 8x16x16 4x12x44 "
    "4x8x68 4x20x28 12x12x16 4x4x148 4x8x76 4x12x52 8x16x20 4x4x164 8x12x28 4x4x172 8x8x44 "
    "12x12x20 4x8x92 4x4x188 12x16x16 4x28x28 8x20x20 4x12x68 8x8x52 4x4x212 12x12x24 4x20x44 "
    "8x16x28 4x12x76 4x8x116 4x4x236 12x16x20 4x4x244 4x8x124 12x12x28 16x16x16 4x20x52 8x12x44 "
    "8x8x68 4x12x92 8x20x28 12x16x24 4x8x148 12x20x20 8x8x76 4x28x44 8x12x52 16x16x20 12x12x36 "
    "4x8x164 12x16x28 4x20x68 4x8x172 4x12x116 8x16x44 12x20x24 4x28x52 8x8x92 4x12x124 4x8x188 "
    "4x20x76 16x16x24 12x24x24 16x20x28"
).split()

_TPU7X_TOPOLOGIES = (
    "12x12x12 12x12x16 12x12x20 12x12x24 12x12x28 12x12x36 12x16x16 12x16x20 12x16x24 12x16x28 "
    "12x20x20 12x20x24 12x24x24 16x16x16 16x16x20 16x16x24 16x16x32 16x20x28 16x24x24 2x2x1 "
    "2x2x2 2x2x4 2x4x4 4x12x116 4x12x12 4x12x124 4x12x20 4x12x28 4x12x44 4x12x52 4x12x68 "
    "4x12x76 4x12x92 4x20x20 4x20x28 4x20x44 4x20x52 4x20x68 4x20x76 4x28x28 4x28x44 4x28x52 "
    "4x4x116 4x4x12 4x4x124 4x4x148 4x4x164 4x4x172 4x4x188 4x4x20 4x4x212 4x4x236 4x4x244 "
    "4x4x28 4x4x4 4x4x44 4x4x52 4x4x68 4x4x76 4x4x8 4x4x92 4x8x116 4x8x12 4x8x124 4x8x148 "
    "4x8x164 4x8x172 4x8x188 4x8x20 4x8x28 4x8x44 4x8x52 4x8x68 4x8x76 4x8x8 4x8x92 8x12x12 "
    "8x12x16 8x12x20 8x12x28 8x12x44 8x12x52 8x16x16 8x16x20 8x16x28 8x16x44 8x20x20 8x20x28 "
    "8x8x12 8x8x16 8x8x20 8x8x28 8x8x44 8x8x52 8x8x68 8x8x76 8x8x8 8x8x92"
).split()


@dataclass(frozen=True)
class MachineType:
    """One PathwaysJob worker machine type and what GKE and Pathways call it."""

    name: str
    generation: str
    accelerator: str
    """Value of the GKE node label ``cloud.google.com/gke-tpu-accelerator``."""
    chips_per_vm: int
    topologies: tuple[str, ...]
    pathways_instance_type: str
    """Prefix of the Pathways resource manager's ``--instance_type=<prefix>:<topology>`` flag."""
    devices_per_chip: int = 1
    """JAX devices per chip: 2 where a chip's two TensorCores are not fused into a megacore (TPU7x;
    ``jax.experimental.pallas.tpu.ChipVersion``), else 1."""

    @property
    def description(self) -> str:
        return f"{self.name} (TPU {self.generation})"


MACHINE_TYPES: Mapping[str, MachineType] = {
    m.name: m
    for m in (
        MachineType("tpu7x-standard-4t", "tpu7x", "tpu7x", 4, tuple(_TPU7X_TOPOLOGIES), "tpu7x", devices_per_chip=2),
        MachineType(
            "ct6e-standard-4t",
            "v6e",
            "tpu-v6e-slice",
            4,
            ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"),
            "tpuv6e",
        ),
        MachineType("ct6e-standard-8t", "v6e", "tpu-v6e-slice", 8, ("2x4",), "tpuv6e1t"),
        MachineType("ct5p-hightpu-4t", "v5p", "tpu-v5p-slice", 4, tuple(_V5P_TOPOLOGIES), "tpuv5"),
        MachineType(
            "ct5lp-hightpu-4t",
            "v5e",
            "tpu-v5-lite-podslice",
            4,
            ("2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16"),
            "tpuv5e",
        ),
        MachineType("ct5lp-hightpu-8t", "v5e", "tpu-v5-lite-podslice", 8, ("2x4",), "tpuv5e1t"),
        MachineType(
            "ct4p-hightpu-4t",
            "v4",
            "tpu-v4-podslice",
            4,
            (
                "2x2x1 2x2x2 2x2x4 2x4x4 4x4x4 4x4x8 4x8x8 4x4x16 8x8x8 8x8x12 8x8x16 "
                "4x16x16 8x16x16"
            ).split(),
            "tpuv4",
        ),
    )
}

# Shorthands a user may write for ``tpu=``: generation names, their common spellings, and the GKE
# accelerator label values. Each resolves to the generation's 4-chip-per-VM machine type, the one
# every topology of that generation is valid for.
_TPU_SHORTHANDS: Mapping[str, str] = {
    "v4": "ct4p-hightpu-4t",
    "tpu-v4-podslice": "ct4p-hightpu-4t",
    "v5e": "ct5lp-hightpu-4t",
    "v5litepod": "ct5lp-hightpu-4t",
    "v5lite": "ct5lp-hightpu-4t",
    "tpu-v5-lite-podslice": "ct5lp-hightpu-4t",
    "v5p": "ct5p-hightpu-4t",
    "tpu-v5p-slice": "ct5p-hightpu-4t",
    "v6e": "ct6e-standard-4t",
    "trillium": "ct6e-standard-4t",
    "tpu-v6e-slice": "ct6e-standard-4t",
    "tpu7x": "tpu7x-standard-4t",
    "v7x": "tpu7x-standard-4t",
    "7x": "tpu7x-standard-4t",
    "ironwood": "tpu7x-standard-4t",
}


@dataclass(frozen=True)
class SliceShape:
    """The size of one slice of a machine type in a topology."""

    machine_type: MachineType
    topology: str
    chips: int
    vms: int
    chips_per_vm: int
    """Chips requested by each worker pod (``google.com/tpu``): the machine type's, always."""


def resolve_machine_type(machine_type: str | None = None, tpu: str | None = None) -> MachineType:
    """Return the catalog entry for a machine type name or a ``tpu`` shorthand such as ``"v5e"``.

    Exactly one of the two may be given; when both are, they must agree on the generation.
    """
    problems: list[SpecProblem] = []
    by_name = by_shorthand = None
    if machine_type is not None:
        by_name = MACHINE_TYPES.get(str(machine_type).strip())
        if by_name is None:
            problems.append(
                SpecProblem("machine_type", machine_type, "unknown machine type", tuple(MACHINE_TYPES))
            )
    if tpu is not None:
        key = str(tpu).strip().lower()
        by_shorthand = MACHINE_TYPES.get(key) or MACHINE_TYPES.get(_TPU_SHORTHANDS.get(key, ""))
        if by_shorthand is None:
            problems.append(
                SpecProblem(
                    "tpu",
                    tpu,
                    "unknown TPU; name a generation or a machine type",
                    sorted({m.generation for m in MACHINE_TYPES.values()}) + list(MACHINE_TYPES),
                )
            )
    if machine_type is None and tpu is None:
        problems.append(
            SpecProblem(
                "machine_type", None, "set machine_type or tpu", tuple(MACHINE_TYPES)
            )
        )
    if by_name and by_shorthand and by_name.generation != by_shorthand.generation:
        problems.append(
            SpecProblem(
                "tpu",
                tpu,
                f"contradicts machine_type={by_name.name!r} (TPU {by_name.generation}); set only one",
            )
        )
    if problems:
        raise InvalidWorkloadSpec(problems)
    resolved = by_name or by_shorthand
    assert resolved is not None
    return resolved


def topology_dimensions(topology: str) -> tuple[int, ...] | None:
    """``"2x4"`` → ``(2, 4)``; ``None`` for anything that is not positive integers joined by ``x``."""
    parts = str(topology).strip().lower().split("x")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        return None
    return tuple(int(p) for p in parts)


def topologies_by_size(machine: MachineType) -> list[str]:
    """The machine type's valid topologies, smallest slice first, for messages a human reads."""
    return sorted(machine.topologies, key=lambda t: (math.prod(topology_dimensions(t) or (0,)), t))


def topology_problem(machine: MachineType, topology: str, field: str = "topology") -> SpecProblem | None:
    """Why ``topology`` is not valid for ``machine``, or ``None`` if it is."""
    if str(topology).strip() in machine.topologies:
        return None
    valid = topologies_by_size(machine)
    shown = valid if len(valid) <= 16 else valid[:12] + [f"... ({len(valid)} in all)"]
    return SpecProblem(
        field, topology, f"not a valid topology for {machine.description}", tuple(shown)
    )


def slice_shape(machine: MachineType, topology: str) -> SliceShape:
    """Size one slice; raises :class:`InvalidWorkloadSpec` for a topology the controller rejects."""
    problem = topology_problem(machine, topology)
    if problem:
        raise InvalidWorkloadSpec([problem])
    dims = topology_dimensions(topology)
    assert dims is not None  # every catalog topology parses
    chips = math.prod(dims)
    vms = max(1, chips // machine.chips_per_vm)
    return SliceShape(machine, str(topology).strip(), chips, vms, machine.chips_per_vm)


TPU_RESOURCE = "google.com/tpu"
"""The extended resource a TPU pod requests its chips as (GKE's TPU device plugin)."""


def pod_spec_chips(pod_spec: Mapping[str, Any]) -> int:
    """The TPU chips a pod spec asks for: the ``google.com/tpu`` limits of its containers (GKE
    requires limits for extended resources; requests, when given, must equal them)."""
    return sum(int(((c.get("resources") or {}).get("limits") or {}).get(TPU_RESOURCE, 0)) for c in pod_spec.get("containers") or ())
