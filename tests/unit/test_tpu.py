"""The TPU catalog: machine types, shorthands, topologies, chips and VMs per slice."""

from __future__ import annotations

import math
import re

import pytest

from pathways_airflow.spec import InvalidWorkloadSpec, resolve_machine_type, slice_shape
from pathways_airflow.spec.tpu import MACHINE_TYPES, topology_dimensions


def test_catalog_holds_exactly_the_crd_machine_types(crds):
    import yaml

    crd = yaml.safe_load((crds / "pathways-job.pathways.domain_pathwaysjobs.yaml").read_text())
    workers = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"][
        "workers"
    ]
    assert set(MACHINE_TYPES) == set(workers["items"]["properties"]["type"]["enum"])


def test_topologies_are_the_controller_table(upstream_samples):
    source = (upstream_samples / "pathwaysjob-valid-topologies.go.txt").read_text()
    table = {
        name: set(re.findall(r'"(\d+x\d+(?:x\d+)?)"', body))
        for name, body in re.findall(r'"([a-z0-9-]+)":\s*\{(.*?)\}', source, re.S)
    }
    assert set(table) == set(MACHINE_TYPES)
    for name, machine in MACHINE_TYPES.items():
        assert set(machine.topologies) == table[name], name


@pytest.mark.parametrize(
    ("machine_type", "topology", "chips", "vms"),
    [
        ("ct5lp-hightpu-4t", "2x4", 8, 2),
        ("ct6e-standard-4t", "4x4", 16, 4),
        ("ct5p-hightpu-4t", "2x2x2", 8, 2),
        ("ct4p-hightpu-4t", "2x2x4", 16, 4),
        ("ct6e-standard-8t", "2x4", 8, 1),
        ("ct5lp-hightpu-8t", "2x4", 8, 1),
        ("ct5lp-hightpu-4t", "16x16", 256, 64),
        ("tpu7x-standard-4t", "2x2x1", 4, 1),
        ("tpu7x-standard-4t", "4x4x4", 64, 16),
        ("ct6e-standard-4t", "1x1", 1, 1),
    ],
)
def test_chips_and_vms_per_slice(machine_type, topology, chips, vms):
    shape = slice_shape(MACHINE_TYPES[machine_type], topology)
    assert (shape.chips, shape.vms) == (chips, vms)


@pytest.mark.parametrize("machine", MACHINE_TYPES.values(), ids=lambda m: m.name)
def test_every_topology_fills_whole_vms(machine):
    for topology in machine.topologies:
        shape = slice_shape(machine, topology)
        assert shape.chips == math.prod(topology_dimensions(topology))
        assert shape.chips_per_vm == machine.chips_per_vm
        if shape.chips >= machine.chips_per_vm:
            assert shape.vms * machine.chips_per_vm == shape.chips, topology
        else:
            assert shape.vms == 1


@pytest.mark.parametrize(
    ("shorthand", "machine_type"),
    [
        ("v5e", "ct5lp-hightpu-4t"),
        ("V5E", "ct5lp-hightpu-4t"),
        ("tpu-v5-lite-podslice", "ct5lp-hightpu-4t"),
        ("v6e", "ct6e-standard-4t"),
        ("tpu-v6e-slice", "ct6e-standard-4t"),
        ("v5p", "ct5p-hightpu-4t"),
        ("v4", "ct4p-hightpu-4t"),
        ("tpu7x", "tpu7x-standard-4t"),
        ("ct6e-standard-8t", "ct6e-standard-8t"),
    ],
)
def test_shorthand_and_machine_type_resolve_to_one_entry(shorthand, machine_type):
    assert resolve_machine_type(tpu=shorthand) is MACHINE_TYPES[machine_type]
    assert resolve_machine_type(machine_type=machine_type) is MACHINE_TYPES[machine_type]


def test_generation_labels_and_pathways_instance_types():
    expected = {
        "tpu7x-standard-4t": ("tpu7x", "tpu7x", "tpu7x"),
        "ct6e-standard-4t": ("v6e", "tpu-v6e-slice", "tpuv6e"),
        "ct6e-standard-8t": ("v6e", "tpu-v6e-slice", "tpuv6e1t"),
        "ct5p-hightpu-4t": ("v5p", "tpu-v5p-slice", "tpuv5"),
        "ct5lp-hightpu-4t": ("v5e", "tpu-v5-lite-podslice", "tpuv5e"),
        "ct5lp-hightpu-8t": ("v5e", "tpu-v5-lite-podslice", "tpuv5e1t"),
        "ct4p-hightpu-4t": ("v4", "tpu-v4-podslice", "tpuv4"),
    }
    actual = {
        name: (m.generation, m.accelerator, m.pathways_instance_type) for name, m in MACHINE_TYPES.items()
    }
    assert actual == expected


def test_unknown_machine_type_names_the_choices():
    with pytest.raises(InvalidWorkloadSpec) as caught:
        resolve_machine_type(machine_type="ct5lp-hightpu-9t")
    problem = caught.value.problems[0]
    assert problem.field == "machine_type" and problem.value == "ct5lp-hightpu-9t"
    assert "ct5lp-hightpu-4t" in problem.choices
    assert "ct5lp-hightpu-9t" in str(caught.value) and "valid:" in str(caught.value)


def test_unknown_tpu_and_missing_tpu_are_errors():
    with pytest.raises(InvalidWorkloadSpec) as caught:
        resolve_machine_type(tpu="v9")
    assert caught.value.fields == ("tpu",) and "v5e" in caught.value.problems[0].choices
    with pytest.raises(InvalidWorkloadSpec) as caught:
        resolve_machine_type()
    assert caught.value.fields == ("machine_type",)


def test_contradicting_tpu_and_machine_type():
    with pytest.raises(InvalidWorkloadSpec, match="contradicts"):
        resolve_machine_type(machine_type="ct6e-standard-4t", tpu="v5e")
    assert resolve_machine_type(machine_type="ct6e-standard-8t", tpu="v6e").name == "ct6e-standard-8t"


def test_invalid_topology_message_lists_valid_ones_smallest_first():
    with pytest.raises(InvalidWorkloadSpec) as caught:
        slice_shape(MACHINE_TYPES["ct5lp-hightpu-4t"], "3x3")
    assert str(caught.value) == (
        "invalid workload spec: topology='3x3': not a valid topology for ct5lp-hightpu-4t (TPU v5e); "
        "valid: 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16"
    )


def test_long_topology_lists_are_shortened_in_messages():
    with pytest.raises(InvalidWorkloadSpec) as caught:
        slice_shape(MACHINE_TYPES["ct5p-hightpu-4t"], "2x2")
    choices = caught.value.problems[0].choices
    assert choices[0] == "2x2x1" and choices[-1].endswith("in all)") and len(choices) == 13


@pytest.mark.parametrize("text", ["2x4", "2x2x1", "16x16"])
def test_topology_dimensions_parse(text):
    assert math.prod(topology_dimensions(text)) > 0


@pytest.mark.parametrize("text", ["", "2", "2x", "x4", "0x4", "2x4x4x4", "a×b", "-2x4"])
def test_topology_dimensions_reject(text):
    assert topology_dimensions(text) is None
