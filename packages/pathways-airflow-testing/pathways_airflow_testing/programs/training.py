"""The MaxText training stand-in: steps on the virtual clock, Orbax-layout checkpoints on GCS.

It behaves the way the provider has to cope with in production: a save is not instant and not
atomic (``_CHECKPOINT_METADATA`` first, the ``items/`` files one by one, ``commit_success.txt``
last), so a pod killed mid-save leaves a partial step; a restarted run resumes after the newest
*committed* step, never a partial one; and a deterministic bug can be planted at a given step.

Command line (MaxText ``key=value`` or ``--key value``):

* ``steps`` (100) — the run trains steps ``0 .. steps-1`` and exits 0 after the last.
* ``checkpoint_period`` (10) — a checkpoint is saved at every multiple of it and at the last step.
* ``enable_autocheckpoint`` (false) — MaxText's checkpoint on preemption
  (``src/maxtext/common/checkpointing.py``: a save is due when ``enable_autocheckpoint`` is set and
  the preemption sync point is reached, then training stops with "Job is preempted."): on SIGTERM
  the last completed step is saved within the grace period; if the grace runs out first, the step
  stays partial (no commit marker).
* ``elastic_enabled`` (false), ``elastic_max_retries``, ``elastic_timeout_seconds`` (here 10 and 1800 when unset) —
  MaxText's elastic training on Pathways (``maxtext.utils.elastic_utils.elastic_retry``, pause/resume:
  ``elastic_min_slice_count=-1``): on a head whose proxy runs with ``--num_elastic_slices``, a lost
  slice fails the current step, the newest step without ``commit_success`` is deleted, the program
  waits in-process until every slice is back and restores the newest committed step; the head's
  pod never restarts. Past the retries or the timeout it exits 1.
* ``enable_multi_tier_checkpointing`` (false), ``local_checkpoint_directory``, ``local_checkpoint_period``
  — MaxText's multi-tier checkpointing (``src/maxtext/configs/base.yml``; Orbax's
  ``experimental/emergency`` managers): besides the GCS saves, a quick local save every
  ``local_checkpoint_period`` steps, kept on the hosts' RAM disks and copied to peer slices, so one
  lost slice does not lose it; a restarted run restores the newest step of either tier and logs
  it as MaxText does (``restoring from this run's directory step N``), whatever
  ``PATHWAYS_RESUME_*`` says. Here the local tier is kept in the GCS emulator under
  ``<bucket>/.local-tier<local_checkpoint_directory>/<run_name>/`` (no reader of the checkpoint
  directory lists it), standing in for the RAM disks and their peer copies.
* ``base_output_directory`` + ``run_name`` — checkpoints go to
  ``<base_output_directory>/<run_name>/checkpoints/<step>/``; ``$PATHWAYS_CHECKPOINT_DIR``, when
  set, names that directory instead. With neither, or ``enable_checkpointing=false``, nothing is
  saved. Only ``gs://`` directories are written (the cluster's GCS emulator).

Environment:

* ``PATHWAYS_TESTING_STEP_SECONDS`` (1) — simulated seconds per step.
* ``PATHWAYS_TESTING_SAVE_SECONDS`` (2) — simulated duration of one save.
* ``PATHWAYS_TESTING_FILES_PER_CHECKPOINT`` (3) — files written under ``items/`` per save.
* ``PATHWAYS_TESTING_FAIL_AT_STEP`` — on reaching this step, exit with
  ``PATHWAYS_TESTING_EXIT_CODE`` (1) instead of training it: a user-code failure.

Run on every host of a plain multislice JobSet (no Pathways head: each pod runs the program), only
JAX's process 0 — the pod of job 0 with completion index 0 — writes a checkpoint, as Orbax has
the primary host alone write the metadata and the commit marker; the others spend the save's time.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

from pathways_airflow.checkpoints import (
    COMMIT_MARKER,
    ITEMS_DIR,
    METADATA_FILE,
    candidate_steps,
    commit_marker_uri,
    is_gcs,
    join,
    maxtext_checkpoint_dir,
    step_uri,
)
from pathways_airflow_testing.programs.args import (
    BadArgument,
    command_tokens,
    env_int,
    env_number,
    parse_params,
)
from pathways_airflow_testing.programs.base import GcsAccess, ProgramContext, SliceView

ELASTIC_POLL_SECONDS = 5.0
"""Simulated seconds between looks at the slices while an elastic retry waits for them."""


@dataclass(frozen=True)
class TrainingPlan:
    """What one training run will do, read from its command line and environment."""

    steps: int
    checkpoint_period: int
    checkpoint_dir: str | None
    run_name: str
    step_seconds: float
    save_seconds: float
    files_per_checkpoint: int
    fail_at_step: int | None
    exit_code: int
    not_saved_because: str | None = None
    autocheckpoint: bool = False
    elastic: bool = False
    elastic_max_retries: int = 10
    elastic_timeout_seconds: float = 1800.0
    local_tier: str | None = None
    """With multi-tier checkpointing: where the local tier of this run is kept (see the module docstring)."""
    local_period: int = 0

    @classmethod
    def from_command(cls, argv: list[str], env: Mapping[str, str]) -> TrainingPlan:
        params = parse_params(command_tokens(argv, env))
        steps = params.integer("steps", 100)
        period = params.integer("checkpoint_period", 10)
        if steps < 1:
            raise BadArgument(f"steps={steps}: must be at least 1")
        if period < 1:
            raise BadArgument(f"checkpoint_period={period}: must be at least 1")
        base, run_name = params.text("base_output_directory"), params.text("run_name") or ""
        checkpoint_dir = env.get("PATHWAYS_CHECKPOINT_DIR") or (
            maxtext_checkpoint_dir(base, run_name) if base and run_name else None
        )
        not_saved_because = None
        if checkpoint_dir and not params.flag("enable_checkpointing", True):
            checkpoint_dir, not_saved_because = None, "enable_checkpointing=false"
        elif checkpoint_dir and not is_gcs(checkpoint_dir):
            checkpoint_dir, not_saved_because = None, f"{checkpoint_dir} is not a gs:// path"
        files = env_int(env, "PATHWAYS_TESTING_FILES_PER_CHECKPOINT", 3) or 0
        if files < 1:
            raise BadArgument(f"PATHWAYS_TESTING_FILES_PER_CHECKPOINT={files}: must be at least 1")
        return cls(
            steps=steps,
            checkpoint_period=period,
            checkpoint_dir=checkpoint_dir.rstrip("/") if checkpoint_dir else None,
            run_name=run_name,
            step_seconds=env_number(env, "PATHWAYS_TESTING_STEP_SECONDS", 1.0),
            save_seconds=env_number(env, "PATHWAYS_TESTING_SAVE_SECONDS", 2.0),
            files_per_checkpoint=files,
            fail_at_step=env_int(env, "PATHWAYS_TESTING_FAIL_AT_STEP", None),
            exit_code=env_int(env, "PATHWAYS_TESTING_EXIT_CODE", 1) or 0,
            not_saved_because=not_saved_because,
            autocheckpoint=params.flag("enable_autocheckpoint", False),
            elastic=params.flag("elastic_enabled", False),
            elastic_max_retries=params.integer("elastic_max_retries", 10),
            elastic_timeout_seconds=float(params.integer("elastic_timeout_seconds", 1800)),
            **_local_tier(params, checkpoint_dir, run_name),
        )

    @property
    def last_step(self) -> int:
        return self.steps - 1

    def saves_locally_at(self, step: int) -> bool:
        """A local-tier save is due (a GCS save at the same step makes it moot)."""
        return self.local_tier is not None and self.local_period > 0 and step % self.local_period == 0 and not self.saves_at(step)

    def saves_at(self, step: int) -> bool:
        return self.checkpoint_dir is not None and (
            step % self.checkpoint_period == 0 or step == self.last_step
        )


def _local_tier(params: Any, checkpoint_dir: str | None, run_name: str) -> dict[str, Any]:
    """The local tier's place and period, when multi-tier checkpointing is on and there is a GCS
    directory to put the emulator's stand-in beside; refused as MaxText refuses it without them."""
    if not params.flag("enable_multi_tier_checkpointing", False):
        return {}
    local, period = params.text("local_checkpoint_directory") or "", params.integer("local_checkpoint_period", 0)
    if not local or period < 1:
        raise BadArgument("enable_multi_tier_checkpointing needs local_checkpoint_directory and a local_checkpoint_period > 0")
    if checkpoint_dir is None or not is_gcs(checkpoint_dir):
        return {}
    bucket = checkpoint_dir.split("/", 3)[2]
    return {"local_tier": join(f"gs://{bucket}", ".local-tier" + "/" + local.strip("/"), run_name or "run"), "local_period": period}


def synthetic_loss(step: int, steps: int) -> float:
    """A loss curve that falls like a real one, so logs and plots look plausible."""
    return 1.5 + 9.0 * math.exp(-4.0 * step / max(1, steps))


def item_file_names(count: int) -> list[str]:
    """Names under ``items/`` shaped like an OCDBT checkpoint's: metadata, manifest, data."""
    names = ["_METADATA", "manifest.ocdbt"]
    names += [f"d/{hashlib.sha1(str(i).encode()).hexdigest()[:32]}" for i in range(count)]
    return names[:count]


async def is_committed(gcs: GcsAccess, step_dir: str) -> bool:
    """A step may be restored, converted or served only once its commit marker exists."""
    return await gcs.exists(commit_marker_uri(step_dir))


async def newest_committed_step(gcs: GcsAccess, checkpoint_dir: str) -> int | None:
    """The step a restarted run restores: the newest with a commit marker, partial ones skipped."""
    subdirs, _ = await gcs.list(join(checkpoint_dir, ""), delimiter="/")
    for step in candidate_steps(subdirs):
        if await is_committed(gcs, step_uri(checkpoint_dir, step)):
            return step
    return None


async def write_checkpoint(
    ctx: ProgramContext,
    step_dir: str,
    *,
    metadata: Mapping[str, object],
    items: Mapping[str, bytes],
    duration: float,
) -> None:
    """Write one step the way Orbax does on GCS, spreading ``duration`` simulated seconds over it.

    Whatever an earlier, interrupted save left in ``step_dir`` is removed first. If the task is
    cancelled on the way, the step stays without its commit marker: partial, as in production.
    The commit sets ``commit_timestamp_nsecs`` in ``_CHECKPOINT_METADATA``, then writes the marker
    (Orbax ``CommitFileTemporaryPath.finalize``, ``checkpoint/orbax/checkpoint/_src/path/atomicity.py``).
    """
    await ctx.gcs.delete_prefix(join(step_dir, ""))
    pause = duration / (len(items) + 1)
    await ctx.gcs.write(join(step_dir, METADATA_FILE), json.dumps(metadata, indent=1).encode())
    for name, data in items.items():
        await ctx.clock.sleep(pause)
        await ctx.gcs.write(join(step_dir, ITEMS_DIR, name), data)
    await ctx.clock.sleep(pause)
    committed = {**metadata, "commit_timestamp_nsecs": int(ctx.clock.now() * 1e9)}
    await ctx.gcs.write(join(step_dir, METADATA_FILE), json.dumps(committed, indent=1).encode())
    marker = f"Checkpoint commit was successful to {step_dir}\n".encode()
    await ctx.gcs.write(commit_marker_uri(step_dir), marker)


def orbax_metadata(ctx: ProgramContext, **extra: object) -> dict[str, object]:
    """``_CHECKPOINT_METADATA`` as Orbax writes it when a save starts: no commit time yet."""
    return {
        "item_handlers": {ITEMS_DIR: "orbax.checkpoint.PyTreeCheckpointHandler"},
        "metrics": {},
        "performance_metrics": {},
        "init_timestamp_nsecs": int(ctx.clock.now() * 1e9),
        "commit_timestamp_nsecs": None,
        "custom": extra,
    }


def item_payloads(names: list[str], header: Mapping[str, object]) -> dict[str, bytes]:
    """Small deterministic files: ``_METADATA`` carries ``header`` so readers can check lineage."""
    return {
        name: json.dumps(dict(header), sort_keys=True).encode()
        if name == "_METADATA"
        else hashlib.sha256(f"{name}:{sorted(header.items())}".encode()).digest() * 4
        for name in names
    }


NO_CHECKPOINT_LINE = "No existing checkpoints found, not restoring checkpoint."


async def run(ctx: ProgramContext) -> int:
    try:
        plan = TrainingPlan.from_command(ctx.argv, ctx.env)
    except BadArgument as error:
        ctx.log(f"error: {error}")
        return 1
    if plan.not_saved_because:
        ctx.log(f"checkpointing disabled: {plan.not_saved_because}")
    slices = ctx.slices if plan.elastic else None
    if plan.elastic:  # maxtext.trainers.pre_train.train.get_train_func, maxtext.utils.elastic_utils.elastic_retry
        ctx.log("Elastic utils: Elastic training enabled.")
        ctx.log("Elastic Retry Enabled")
    if slices is not None:
        slices.handles_losses = True
    retries = 0
    while True:
        try:
            return await _train(ctx, plan, slices)
        except SliceLost:
            retries += 1
            if retries > plan.elastic_max_retries:
                ctx.log(f"jax.errors.JaxRuntimeError: UNAVAILABLE: a TPU slice is gone, and {plan.elastic_max_retries} elastic retries are spent")
                return 1
        assert slices is not None
        await _clean_up_incomplete_checkpoint(ctx, plan)
        if not await _all_slices_back(ctx, plan, slices):
            ctx.log(f"jax.errors.JaxRuntimeError: UNAVAILABLE: the lost TPU slice did not come back within {plan.elastic_timeout_seconds} s")
            return 1


class SliceLost(Exception):
    """A slice the program runs on is gone (the ``JaxRuntimeError`` an elastic retry catches)."""


async def _train(ctx: ProgramContext, plan: TrainingPlan, slices: SliceView | None) -> int:
    # What MaxText logs as it looks for a checkpoint to resume from (src/MaxText/checkpointing.py,
    # load_state_if_possible): these lines are how a reader learns the step a run resumed from.
    start = 0
    if plan.checkpoint_dir is not None:
        ctx.log("checkpoint manager exists so trying to load this run's existing checkpoint")
        restored = await newest_committed_step(ctx.gcs, plan.checkpoint_dir)
        if plan.local_tier is not None:
            restored = max((s for s in (restored, await newest_committed_step(ctx.gcs, plan.local_tier)) if s is not None), default=None)
        if restored is None:
            ctx.log(NO_CHECKPOINT_LINE)
        else:
            ctx.log(f"restoring from this run's directory step {restored}")
            start = restored + 1
    else:
        ctx.log(NO_CHECKPOINT_LINE)

    losses = slices.losses if slices is not None else 0
    step, completed, loss = start, None, 0.0
    try:
        for step in range(start, plan.steps):
            if plan.fail_at_step is not None and step == plan.fail_at_step:
                ctx.log(
                    f"error at step {step}: failing as PATHWAYS_TESTING_FAIL_AT_STEP={plan.fail_at_step} "
                    f"asks; exit code {plan.exit_code}"
                )
                return plan.exit_code
            await ctx.clock.sleep(plan.step_seconds)
            if slices is not None and slices.losses != losses:  # the step's computation failed on the lost slice
                raise SliceLost()
            loss, completed = synthetic_loss(step, plan.steps), step
            ctx.log(
                f"completed step: {step}, seconds: {plan.step_seconds:.3f}, TFLOP/s/device: 101.250, "
                f"Tokens/s/device: 2048.000, total_weights: 16384, loss: {loss:.3f}"
            )
            if plan.saves_at(step) and is_primary_process(ctx):
                await _save(ctx, plan, step, loss)
            elif plan.saves_at(step):
                await ctx.clock.sleep(plan.save_seconds)
            elif plan.saves_locally_at(step) and is_primary_process(ctx):
                await _save(ctx, plan, step, loss, local=True)
    except asyncio.CancelledError:
        if plan.autocheckpoint and completed is not None and plan.checkpoint_dir and is_primary_process(ctx):
            ctx.log(f"preemption reached at step {completed}: saving a checkpoint (enable_autocheckpoint)")
            await _save(ctx, plan, completed, loss)  # the kubelet cancels again when the grace period ends: partial
            ctx.log("Job is preempted.")
        else:
            ctx.log(f"terminated at step {step}; no checkpoint is committed for unfinished work")
        raise
    ctx.log(f"training finished: {plan.steps} steps")
    return 0


async def _clean_up_incomplete_checkpoint(ctx: ProgramContext, plan: TrainingPlan) -> None:
    """What MaxText's elastic retry does first (maxtext.utils.elastic_utils.clean_up_incomplete_checkpoints):
    the newest step directory without ``commit_success`` is deleted."""
    ctx.log("Elastic utils: Checking for incomplete checkpoint after an elastic event...")
    if plan.checkpoint_dir is None:
        return
    subdirs, _ = await ctx.gcs.list(join(plan.checkpoint_dir, ""))
    steps = sorted(candidate_steps(subdirs))
    if not steps:
        ctx.log("Found no existing checkpoints. Continuing")
        return
    latest = join(step_uri(plan.checkpoint_dir, steps[-1]), "")
    ctx.log(f"Checking latest checkpoint: {latest}")
    if await is_committed(ctx.gcs, step_uri(plan.checkpoint_dir, steps[-1])):
        ctx.log(f"Found commit_success file. Keeping {latest}.")
    else:
        ctx.log(f"No commit_success file found. Deleting {latest}...")
        await ctx.gcs.delete_prefix(latest)


async def _all_slices_back(ctx: ProgramContext, plan: TrainingPlan, slices: SliceView) -> bool:
    """Pause/resume (``elastic_min_slice_count=-1``): wait for every slice of the JobSet."""
    waited = 0.0
    while not slices.all_ready():
        if waited >= plan.elastic_timeout_seconds:
            return False
        await ctx.clock.sleep(ELASTIC_POLL_SECONDS)
        waited += ELASTIC_POLL_SECONDS
    return True


def is_primary_process(ctx: ProgramContext) -> bool:
    """Whether this pod is JAX's process 0: a JobSet's job 0, pod 0 (its labels), or a lone pod."""
    labels = ctx.labels
    return labels.get("jobset.sigs.k8s.io/job-index", "0") == "0" and labels.get("batch.kubernetes.io/job-completion-index", "0") == "0"


LOCAL_SAVE_FRACTION = 0.1
"""A local-tier save takes this share of a GCS save's time (a RAM disk, not a bucket)."""


async def _save(ctx: ProgramContext, plan: TrainingPlan, step: int, loss: float, *, local: bool = False) -> None:
    assert plan.checkpoint_dir is not None
    step_dir = step_uri(plan.local_tier if local and plan.local_tier else plan.checkpoint_dir, step)
    if local:
        await write_checkpoint(ctx, step_dir, metadata=orbax_metadata(ctx, step=step), items={"_METADATA": b"{}"},
                               duration=plan.save_seconds * LOCAL_SAVE_FRACTION)
        ctx.log(f"saved a local checkpoint at step {step} (multi-tier: RAM disk, copied to peers)")
        return
    ctx.log(f"saving checkpoint for step {step} to {step_dir}")
    header = {"kind": "train_state", "step": step, "run_name": plan.run_name, "loss": round(loss, 6)}
    await write_checkpoint(
        ctx,
        step_dir,
        metadata=orbax_metadata(ctx, step=step),
        items=item_payloads(item_file_names(plan.files_per_checkpoint), header),
        duration=plan.save_seconds,
    )
    ctx.log(f"saved a checkpoint at step {step} ({COMMIT_MARKER} written)")
