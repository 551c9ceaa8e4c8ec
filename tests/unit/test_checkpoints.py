"""Orbax commit rules, step choice, CheckpointSensor arguments and CheckpointTrigger on a local directory."""

from __future__ import annotations

import asyncio
import os

import pytest

from pathways_airflow.checkpoints import (
    Checkpoint,
    checkpoint_dir_of,
    checkpoint_named_by,
    committed_on_gcs,
    committed_steps_in_listing,
    gcs_object_prefix,
    newest_committed,
    step_entries_newest_first,
)
from pathways_airflow.checkpoints import CheckpointScan, describe_scan
from pathways_airflow.hooks.storage import newest_committed_checkpoint, scan_checkpoints
from pathways_airflow.sensors.checkpoint import CheckpointSensor
from pathways_airflow.spec.arguments import checkpoint_arguments
from pathways_airflow.triggers.checkpoint import CheckpointTrigger

DIR = "gs://bucket/runs/r1/checkpoints"

# A recursive listing of a MaxText run: step 10 committed, step 20 committed, step 30 cut off
# by maintenance after its arrays (no marker), step 40 just started (metadata only).
LISTING = [
    "runs/r1/checkpoints/10/_CHECKPOINT_METADATA",
    "runs/r1/checkpoints/10/items/_METADATA",
    "runs/r1/checkpoints/10/items/d/0a1b",
    "runs/r1/checkpoints/10/commit_success.txt",
    "runs/r1/checkpoints/20/_CHECKPOINT_METADATA",
    "runs/r1/checkpoints/20/items/_METADATA",
    "runs/r1/checkpoints/20/commit_success.txt",
    "runs/r1/checkpoints/30/_CHECKPOINT_METADATA",
    "runs/r1/checkpoints/30/items/_METADATA",
    "runs/r1/checkpoints/30/items/d/ffee",
    "runs/r1/checkpoints/40/_CHECKPOINT_METADATA",
]


def markers_in(listing):
    prefix = gcs_object_prefix(DIR)
    return {name[len(prefix) :] for name in listing}


def test_a_gcs_step_is_committed_only_with_its_marker():
    assert committed_steps_in_listing(DIR, LISTING) == [20, 10]
    assert committed_steps_in_listing(DIR, [n.split("checkpoints/", 1)[1] for n in LISTING]) == [20, 10]
    relative = markers_in(LISTING)
    assert committed_on_gcs("20", relative)
    assert not committed_on_gcs("30", relative)  # arrays written, marker missing: partial
    assert not committed_on_gcs("40", relative)  # _CHECKPOINT_METADATA is written when a save starts


def test_the_newest_committed_step_skips_partial_steps_asking_newest_first():
    relative = markers_in(LISTING)
    asked = []

    def is_committed(name):
        asked.append(name)
        return committed_on_gcs(name, relative)

    prefixes = ["runs/r1/checkpoints/10/", "runs/r1/checkpoints/20/", "runs/r1/checkpoints/30/", "runs/r1/checkpoints/40/"]
    found = newest_committed(DIR, prefixes, is_committed=is_committed)
    assert found == Checkpoint(20, f"{DIR}/20")
    assert asked == ["40", "30", "20"]  # never step 10: older than the answer


@pytest.mark.parametrize(
    ("newer_than", "min_step", "expected"),
    [(None, None, 20), (10, None, 20), (20, None, None), (None, 20, 20), (None, 21, None), (5, 10, 20), (None, 0, 20)],
)
def test_bounds_on_the_step(newer_than, min_step, expected):
    relative = markers_in(LISTING)
    found = newest_committed(
        DIR, ["10/", "20/", "30/", "40/"], is_committed=lambda n: committed_on_gcs(n, relative),
        newer_than=newer_than, min_step=min_step,
    )
    assert (found.step if found else None) == expected


def test_local_temporaries_and_other_names_are_never_steps():
    entries = ["10", "20", "30.orbax-checkpoint-tmp-1712", "40.orbax-checkpoint-tmp", "tensorboard", "best", "-5"]
    assert committed_steps_in_listing("/ckpt", entries) == [20, 10]
    assert step_entries_newest_first(entries) == [(20, "20"), (10, "10")]
    assert step_entries_newest_first(["000100/", "99/"], min_step=100) == [(100, "000100")]


def test_a_local_directory_reports_renamed_steps_only(tmp_path):
    for name in ("10", "20", "30.orbax-checkpoint-tmp-99"):
        (tmp_path / name / "items").mkdir(parents=True)
    (tmp_path / "40").write_text("a file named like a step is not a step directory")
    scan = scan_checkpoints(str(tmp_path))
    assert scan.found == Checkpoint(20, f"{tmp_path}/20")
    assert scan.in_progress == 1
    assert newest_committed_checkpoint(str(tmp_path), newer_than=20) is None
    assert newest_committed_checkpoint(str(tmp_path / "not-yet")) is None  # Orbax makes it on the first save
    assert "1 save(s) in progress" in describe_scan(scan_checkpoints(str(tmp_path), newer_than=20), newer_than=20)


def test_describe_scan_says_why_it_keeps_waiting():
    partial = CheckpointScan(DIR, None, partial=(40, 30), newest_seen=40)
    assert describe_scan(partial, newer_than=20) == (
        f"no committed step newer than step 20 in {DIR} yet: step 40, 30 not committed "
        "(no commit_success.txt: a save in progress or cut off)"
    )
    assert describe_scan(CheckpointScan(DIR, None), min_step=5).endswith("at step 5 or later in " + DIR + " yet: no step directories")
    assert describe_scan(CheckpointScan(DIR, Checkpoint(20, f"{DIR}/20"))) == f"step 20 is committed: {DIR}/20"


def test_arguments_accept_rendered_templates():
    assert checkpoint_arguments("gs://b/c", "80", " 7 ") == ("gs://b/c", 80, 7)
    assert checkpoint_arguments("/mnt/ckpt", "None", "") == ("/mnt/ckpt", None, None)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"checkpoint_dir": "runs/r1/checkpoints"}, "checkpoint_dir"),
        ({"checkpoint_dir": "gs://"}, "checkpoint_dir"),
        ({"checkpoint_dir": "s3://b/c"}, "checkpoint_dir"),
        ({"checkpoint_dir": DIR, "min_step": -1}, "min_step"),
        ({"checkpoint_dir": DIR, "newer_than": "ten"}, "newer_than"),
        ({"checkpoint_dir": DIR, "newer_than": True}, "newer_than"),
    ],
)
def test_the_sensor_refuses_bad_arguments_naming_the_field(kwargs, field):
    with pytest.raises(ValueError) as refused:
        CheckpointSensor(task_id="wait", **kwargs)
    assert f"{field}=" in str(refused.value)
    assert getattr(refused.value, "fields", ()) == (field,)


def test_templated_arguments_are_checked_once_rendered():
    sensor = CheckpointSensor(task_id="wait", checkpoint_dir="{{ params.dir }}", newer_than="{{ ti.xcom_pull('train') }}")
    sensor.checkpoint_dir, sensor.newer_than = "relative/dir", "3"
    with pytest.raises(ValueError, match="checkpoint_dir='relative/dir'"):
        sensor.poke({})


def test_the_trigger_round_trips_and_finds_a_step_committed_while_it_waits(tmp_path):
    (tmp_path / "10").mkdir()
    trigger = CheckpointTrigger(checkpoint_dir=str(tmp_path), newer_than=10, poll_interval=0.05)
    path, kwargs = trigger.serialize()
    assert path == "pathways_airflow.triggers.checkpoint.CheckpointTrigger"
    revived = CheckpointTrigger(**kwargs)
    assert revived.serialize() == (path, kwargs)

    async def scenario():
        async def save_step_20():
            await asyncio.sleep(0.2)
            (tmp_path / "20.orbax-checkpoint-tmp-5").mkdir()
            await asyncio.sleep(0.2)
            os.rename(tmp_path / "20.orbax-checkpoint-tmp-5", tmp_path / "20")

        saver = asyncio.create_task(save_step_20())
        events = [event async for event in revived.run()]
        await saver
        return events

    events = asyncio.run(asyncio.wait_for(scenario(), timeout=10))
    assert [e.payload for e in events] == [{"status": "found", "checkpoint": {"step": 20, "uri": f"{tmp_path}/20"}}]


def test_the_trigger_gives_up_with_one_error_event_after_repeated_failures(tmp_path):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    trigger = CheckpointTrigger(checkpoint_dir=str(not_a_directory), poll_interval=0.01, max_failures=3)

    async def scenario():
        return [event async for event in trigger.run()]

    events = asyncio.run(asyncio.wait_for(scenario(), timeout=10))
    assert len(events) == 1
    assert events[0].payload["status"] == "error"
    assert "3 looks in a row failed" in events[0].payload["message"]
    assert "NotADirectoryError" in events[0].payload["message"]


# --- which step an asset event names ---------------------------------------------------------


@pytest.mark.parametrize(
    "extra, expected",
    [
        # pathways_training's outlet event: the final committed step and where it lives
        (
            {"step": 29, "uri": "gs://b/runs/r/checkpoints/29", "workload": "train-abc", "disruptions": "no disruptions"},
            Checkpoint(29, "gs://b/runs/r/checkpoints/29"),
        ),
        # an AssetWatcher event: CheckpointCommittedTrigger's payload under "payload"
        (
            {"from_trigger": True, "payload": {"step": 40, "uri": "gs://b/ext/checkpoints/40", "checkpoint_dir": "gs://b/ext/checkpoints"}},
            Checkpoint(40, "gs://b/ext/checkpoints/40"),
        ),
        # a load path (<step>/items) names its step directory; a rendered string step is accepted
        ({"step": "7", "uri": "gs://b/c/7/items"}, Checkpoint(7, "gs://b/c/7")),
        # the step disagrees with the URI: refused rather than guessed
        ({"step": 30, "uri": "gs://b/runs/r/checkpoints/29"}, None),
        ({"step": True, "uri": "gs://b/c/1"}, None),
        ({"step": 1}, None),
        ({"uri": "gs://b/c/1"}, None),
        ({"from_trigger": True, "payload": "garbage"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_the_step_an_asset_event_names(extra, expected):
    assert checkpoint_named_by(extra) == expected


def test_the_directory_of_a_named_step():
    assert checkpoint_dir_of(Checkpoint(29, "gs://b/runs/r/checkpoints/29")) == "gs://b/runs/r/checkpoints"


def test_when_the_program_began_saving_a_committed_step_is_read_from_the_metadata_orbax_finalizes():
    from pathways_airflow.checkpoints import began_saving_at

    # checkpoint/orbax/checkpoint/_src/path/atomicity.py: init_timestamp_nsecs when the save starts,
    # commit_timestamp_nsecs set by finalize() just before commit_success.txt.
    started = b'{"item_handlers": {"items": "orbax.checkpoint.PyTreeCheckpointHandler"}, "init_timestamp_nsecs": 1796619634500000000, "commit_timestamp_nsecs": null}'
    finalized = started.replace(b'"commit_timestamp_nsecs": null', b'"commit_timestamp_nsecs": 1796619641500000000')
    assert began_saving_at(finalized) == 1796619634.5
    assert began_saving_at(started) is None, "not finalized"
    assert began_saving_at(None) is None and began_saving_at(b"not json") is None and began_saving_at(b"[1]") is None
    assert began_saving_at(b'{"init_timestamp_nsecs": true, "commit_timestamp_nsecs": 2}') is None
