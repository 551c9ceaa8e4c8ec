"""The MaxText ``generate_param_only_checkpoint`` stand-in: train state → serving checkpoint.

It keeps the two rules a conversion pipeline depends on: it refuses a source step that is not
committed (MaxText fails with "Found incomplete checkpoint"), and it deletes its output
checkpoint directory before writing, so the output is partial — no commit marker — until the very
end, and a rerun never mixes old and new files.

Command line (MaxText ``key=value`` or ``--key value``):

* ``load_full_state_path`` — ``<training checkpoint dir>/<step>/items`` (required, ``gs://``).
* ``base_output_directory`` + ``run_name`` — output: ``<base>/<run>/checkpoints/0/items``.
* ``quantization`` (e.g. ``int8``) and ``force_unroll`` — recorded in the output's ``_METADATA``.

Environment: ``PATHWAYS_TESTING_CONVERT_SECONDS`` (5) simulated seconds for the conversion,
``PATHWAYS_TESTING_FILES_PER_CHECKPOINT`` (3) files written under ``items/``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

from pathways_airflow.checkpoints import (
    ITEMS_DIR,
    is_gcs,
    join,
    maxtext_checkpoint_dir,
    step_dir_of,
    step_of,
    step_uri,
)
from pathways_airflow_testing.programs.args import (
    BadArgument,
    command_tokens,
    env_int,
    env_number,
    parse_params,
)
from pathways_airflow_testing.programs.base import ProgramContext
from pathways_airflow_testing.programs.training import (
    is_committed,
    item_file_names,
    item_payloads,
    orbax_metadata,
    write_checkpoint,
)

OUTPUT_STEP = 0


@dataclass(frozen=True)
class ConversionPlan:
    source: str
    """``load_full_state_path`` as given: ``<step dir>/items``."""
    output_checkpoint_dir: str
    quantization: str
    force_unroll: bool
    convert_seconds: float
    files_per_checkpoint: int

    @classmethod
    def from_command(cls, argv: list[str], env: Mapping[str, str]) -> ConversionPlan:
        params = parse_params(command_tokens(argv, env))
        source = params.text("load_full_state_path")
        base, run_name = params.text("base_output_directory"), params.text("run_name")
        required = {"load_full_state_path": source, "base_output_directory": base, "run_name": run_name}
        missing = [name for name, value in required.items() if not value]
        if missing:
            raise BadArgument(f"missing {', '.join(missing)} (give them as key=value)")
        assert source and base and run_name
        for name, value in (("load_full_state_path", source), ("base_output_directory", base)):
            if not is_gcs(value):
                raise BadArgument(f"{name}={value!r}: only gs:// paths are emulated")
        files = env_int(env, "PATHWAYS_TESTING_FILES_PER_CHECKPOINT", 3) or 0
        if files < 1:
            raise BadArgument(f"PATHWAYS_TESTING_FILES_PER_CHECKPOINT={files}: must be at least 1")
        return cls(
            source=source.rstrip("/"),
            output_checkpoint_dir=maxtext_checkpoint_dir(base, run_name),
            quantization=params.text("quantization", "") or "",
            force_unroll=params.flag("force_unroll", False),
            convert_seconds=env_number(env, "PATHWAYS_TESTING_CONVERT_SECONDS", 5.0),
            files_per_checkpoint=files,
        )

    @property
    def source_step_dir(self) -> str:
        return step_dir_of(self.source)

    @property
    def output_step_dir(self) -> str:
        return step_uri(self.output_checkpoint_dir, OUTPUT_STEP)


async def run(ctx: ProgramContext) -> int:
    try:
        plan = ConversionPlan.from_command(ctx.argv, ctx.env)
    except BadArgument as error:
        ctx.log(f"error: {error}")
        return 1

    source_step = step_of(plan.source_step_dir)
    if not await is_committed(ctx.gcs, plan.source_step_dir):
        _, present = await ctx.gcs.list(join(plan.source_step_dir, ""), delimiter=None)
        why = "it has no commit_success.txt" if present else "it does not exist"
        ctx.log(f"error: Found incomplete checkpoint at {plan.source_step_dir}: {why}; not converting it")
        return 1

    ctx.log(f"loading full train state from step {source_step}: {plan.source}")
    deleted = await ctx.gcs.delete_prefix(join(plan.output_checkpoint_dir, ""))
    if deleted:
        ctx.log(f"deleted {deleted} objects from the previous output in {plan.output_checkpoint_dir}")
    await ctx.clock.sleep(plan.convert_seconds / 2)

    source_header = await ctx.gcs.read(join(plan.source, "_METADATA"))
    header: dict[str, object] = {
        "kind": "params",
        "source": plan.source,
        "source_step": source_step,
        "quantization": plan.quantization or None,
        "force_unroll": plan.force_unroll,
    }
    if source_header is not None:
        try:
            header["source_metadata"] = json.loads(source_header)
        except ValueError:
            pass
    await write_checkpoint(
        ctx,
        plan.output_step_dir,
        metadata=orbax_metadata(ctx, source_step=source_step),
        items=item_payloads(item_file_names(plan.files_per_checkpoint), header),
        duration=plan.convert_seconds / 2,
    )
    quantized = f", quantization={plan.quantization}" if plan.quantization else ""
    ctx.log(
        f"saved param-only checkpoint from step {source_step}{quantized} to "
        f"{join(plan.output_step_dir, ITEMS_DIR)}"
    )
    return 0
