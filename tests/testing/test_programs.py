"""Stand-in workloads run for real: on an event loop, against the GCS emulator, on a fast clock."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Awaitable, Callable

import aiohttp
import pytest

from pathways_airflow.checkpoints import COMMIT_MARKER, METADATA_FILE
from pathways_airflow_testing.programs import MAXTEXT_LAYOUT_ENV, PROGRAMS, choose_program, missing_from_the_image, program_name
from pathways_airflow_testing.programs.args import command_tokens, parse_params
from pathways_airflow_testing.programs.benchmark import METRIC_KEYS, copy_destination, percentile
from pathways_airflow_testing.programs.training import item_file_names
from tests.support.programs import Container, RecordingGcs, base, cancel, container, emulator, on_loop

PATHWAYS_IMAGES = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways"


async def run_program(box: Container) -> int:
    program = choose_program(box.context.argv, box.context.env, "maxtext:latest")
    return await asyncio.wait_for(program(box.context), timeout=15)


async def eventually(condition: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def train_argv(base: str, *settings: str) -> list[str]:
    return ["python3", "-m", "MaxText.train", "MaxText/configs/base.yml",
            f"base_output_directory={base}", "run_name=run1", *settings]  # fmt: skip


def step_files(checkpoint_dir: str, step: int, files: int = 3) -> set[str]:
    step_dir = f"{checkpoint_dir}/{step}"
    items = {f"{step_dir}/items/{name}" for name in item_file_names(files)}
    return {f"{step_dir}/{METADATA_FILE}", f"{step_dir}/{COMMIT_MARKER}", *items}


async def all_objects(gcs: RecordingGcs, prefix: str) -> set[str]:
    return set((await gcs.list(prefix.rstrip("/") + "/", delimiter=None))[1])


# --- training -------------------------------------------------------------------------------------


def test_training_writes_committed_checkpoints_in_orbax_layout(emulator, base):
    checkpoints = f"{base}/run1/checkpoints"

    async def scenario(gcs: RecordingGcs):
        box = container(gcs, train_argv(base, "steps=25", "checkpoint_period=10"))
        assert await run_program(box) == 0
        assert box.logs[:2] == ["checkpoint manager exists so trying to load this run's existing checkpoint", "No existing checkpoints found, not restoring checkpoint."]
        assert [line.split(",")[0] for line in box.lines_with("completed step:")] == [
            f"completed step: {n}" for n in range(25)
        ]
        expected = set().union(*(step_files(checkpoints, s) for s in (0, 10, 20, 24)))
        assert await all_objects(gcs, checkpoints) == expected
        for step in (0, 10, 20, 24):
            mine = [uri for uri in gcs.writes if uri.startswith(f"{checkpoints}/{step}/")]
            assert mine[0].endswith(METADATA_FILE) and mine[-1].endswith(COMMIT_MARKER)
        item_metadata = json.loads(await gcs.read(f"{checkpoints}/24/items/_METADATA"))
        assert item_metadata["step"] == 24

    on_loop(emulator, scenario)


def test_on_every_host_of_a_multislice_jobset_only_process_0_writes_the_checkpoint(emulator, base):
    """Several pods training at once must not overwrite each other's step directory: as Orbax, the
    primary host (job 0, pod 0) commits; the others spend the same time and write nothing."""
    checkpoints = f"{base}/run1/checkpoints"

    async def scenario(gcs: RecordingGcs):
        other = container(gcs, train_argv(base, "steps=5", "checkpoint_period=2"))
        other.context.labels = {"jobset.sigs.k8s.io/job-index": "1", "batch.kubernetes.io/job-completion-index": "0"}
        assert await run_program(other) == 0
        assert await all_objects(gcs, checkpoints) == set()
        primary = container(gcs, train_argv(base, "steps=5", "checkpoint_period=2"))
        primary.context.labels = {"jobset.sigs.k8s.io/job-index": "0", "batch.kubernetes.io/job-completion-index": "0"}
        assert await run_program(primary) == 0
        assert await all_objects(gcs, checkpoints) == set().union(*(step_files(checkpoints, s) for s in (0, 2, 4)))

    on_loop(emulator, scenario)


def test_training_resumes_from_the_newest_committed_step_after_a_kill_mid_save(emulator, base):
    checkpoints = f"{base}/run1/checkpoints"
    argv = train_argv(base, "steps=30", "checkpoint_period=10")

    async def scenario(gcs: RecordingGcs):
        first = container(gcs, argv, {"PATHWAYS_TESTING_SAVE_SECONDS": "800"})
        task = asyncio.create_task(run_program(first))
        await eventually(lambda: gcs.exists(f"{checkpoints}/10/items/_METADATA"))
        await cancel(task)
        assert first.lines_with("terminated at step 10")
        partial = await all_objects(gcs, f"{checkpoints}/10")
        assert f"{checkpoints}/10/{METADATA_FILE}" in partial
        assert f"{checkpoints}/10/{COMMIT_MARKER}" not in partial
        assert await gcs.exists(f"{checkpoints}/0/{COMMIT_MARKER}")

        second = container(gcs, argv)
        assert await run_program(second) == 0
        assert second.lines_with("restoring from this run's directory step") == ["restoring from this run's directory step 0"]
        assert second.lines_with("completed step:")[0].startswith("completed step: 1,")
        expected = set().union(*(step_files(checkpoints, s) for s in (0, 10, 20, 29)))
        assert await all_objects(gcs, checkpoints) == expected

        third = container(gcs, argv)
        assert await run_program(third) == 0
        assert third.lines_with("restoring from this run's directory step") == ["restoring from this run's directory step 29"]
        assert not third.lines_with("completed step:")

    on_loop(emulator, scenario)


def test_with_multi_tier_checkpointing_a_restart_restores_the_newest_step_of_either_tier(emulator, base):
    """Local copies every 3 steps, GCS every 10: killed after step 14, the next run restores the
    local step 12, which no reader of the checkpoint directory sees; GCS still ends at step 10."""
    checkpoints = f"{base}/run1/checkpoints"
    tiers = ("enable_multi_tier_checkpointing=true", "local_checkpoint_directory=/local", "local_checkpoint_period=3")
    argv = train_argv(base, "steps=30", "checkpoint_period=10", *tiers)

    async def scenario(gcs: RecordingGcs):
        first = container(gcs, argv, {"PATHWAYS_TESTING_STEP_SECONDS": "5"})
        task = asyncio.create_task(run_program(first))
        await eventually(lambda: asyncio.sleep(0, bool(first.lines_with("completed step: 14,"))))
        await cancel(task)
        assert first.lines_with("saved a local checkpoint at step") == [f"saved a local checkpoint at step {s} (multi-tier: RAM disk, copied to peers)" for s in (3, 6, 9, 12)]
        steps = {int(o.split("/")[-2]) for o in await all_objects(gcs, checkpoints) if o.endswith(COMMIT_MARKER)}
        assert steps == {0, 10}  # the local tier is not under the checkpoint directory
        second = container(gcs, argv, {"PATHWAYS_RESUME_STEP": "10"})  # what the provider would hand over: not obeyed, as in MaxText
        task = asyncio.create_task(run_program(second))
        await eventually(lambda: asyncio.sleep(0, bool(second.lines_with("completed step:"))))
        await cancel(task)
        assert second.lines_with("restoring from this run's directory step") == ["restoring from this run's directory step 12"]
        assert second.lines_with("completed step:")[0].startswith("completed step: 13,")

    on_loop(emulator, scenario)
    refused = container(None, train_argv(base, "enable_multi_tier_checkpointing=true"))
    assert asyncio.run(run_program(refused)) == 1 and refused.lines_with("error: enable_multi_tier_checkpointing needs")


def test_training_fails_at_the_configured_step_with_the_configured_code_every_time(emulator, base):
    checkpoints = f"{base}/run1/checkpoints"
    argv = train_argv(base, "--steps", "20", "--checkpoint_period=5")
    env = {"PATHWAYS_TESTING_FAIL_AT_STEP": "7", "PATHWAYS_TESTING_EXIT_CODE": "42"}

    async def scenario(gcs: RecordingGcs):
        first = container(gcs, argv, env)
        assert await run_program(first) == 42
        assert first.lines_with("completed step:")[-1].startswith("completed step: 6,")
        assert await all_objects(gcs, checkpoints) == step_files(checkpoints, 0) | step_files(checkpoints, 5)

        retry = container(gcs, argv, env)
        assert await run_program(retry) == 42
        assert retry.lines_with("restoring from this run's directory step") == ["restoring from this run's directory step 5"]

    on_loop(emulator, scenario)


def test_training_writes_nothing_when_checkpointing_is_off_and_honours_the_checkpoint_dir_env(emulator, base):
    async def scenario(gcs: RecordingGcs):
        off = container(gcs, train_argv(base, "steps=3", "enable_checkpointing=false"))
        assert await run_program(off) == 0
        assert off.lines_with("checkpointing disabled: enable_checkpointing=false")

        elsewhere = f"{base}/elsewhere"
        redirected = container(gcs, train_argv(base, "steps=3"), {"PATHWAYS_CHECKPOINT_DIR": elsewhere})
        assert await run_program(redirected) == 0
        assert await all_objects(gcs, base) == step_files(elsewhere, 0) | step_files(elsewhere, 2)

        bad = container(gcs, train_argv(base, "steps=many"))
        assert await run_program(bad) == 1
        assert bad.lines_with("steps='many': not an integer")

    on_loop(emulator, scenario)


# --- conversion -----------------------------------------------------------------------------------


def conversion_argv(source: str, base: str) -> list[str]:
    script = (
        "cd /deps && python3 -m MaxText.generate_param_only_checkpoint MaxText/configs/base.yml "
        f"load_full_state_path={source} base_output_directory={base}/serving run_name=$RUN "
        "force_unroll=true quantization=int8"
    )
    return ["bash", "-c", script]


def test_conversion_refuses_a_partial_or_missing_source_and_leaves_the_output_alone(emulator, base):
    checkpoints = f"{base}/run1/checkpoints"
    old_output = f"{base}/serving/conv/checkpoints/0/{COMMIT_MARKER}"

    async def scenario(gcs: RecordingGcs):
        await gcs.write(f"{checkpoints}/40/{METADATA_FILE}", b"{}")
        await gcs.write(f"{checkpoints}/40/items/_METADATA", b"{}")
        await gcs.write(old_output, b"previous conversion")
        env = {"RUN": "conv"}
        refusals = {
            f"{checkpoints}/40/items": "no commit_success.txt",
            f"{checkpoints}/50/items": "does not exist",
        }
        for source, why in refusals.items():
            box = container(gcs, conversion_argv(source, base), env)
            assert await run_program(box) == 1
            assert box.lines_with("Found incomplete checkpoint") and box.lines_with(why)
        assert await gcs.read(old_output) == b"previous conversion"

    on_loop(emulator, scenario)


def test_conversion_replaces_the_output_with_a_committed_serving_checkpoint(emulator, base):
    checkpoints = f"{base}/run1/checkpoints"
    output = f"{base}/serving/conv/checkpoints"

    async def scenario(gcs: RecordingGcs):
        assert await run_program(container(gcs, train_argv(base, "steps=10", "checkpoint_period=5"))) == 0
        await gcs.write(f"{output}/0/items/stale", b"old")
        await gcs.write(f"{output}/3/{COMMIT_MARKER}", b"old")

        box = container(gcs, conversion_argv(f"{checkpoints}/9/items", base), {"RUN": "conv"})
        assert await run_program(box) == 0
        assert box.lines_with("from step 9")
        assert box.lines_with(f"{output}/0/items")
        assert await all_objects(gcs, output) == step_files(output, 0)
        written = [uri for uri in gcs.writes if uri.startswith(output + "/")]
        assert written[-1] == f"{output}/0/{COMMIT_MARKER}"
        header = json.loads(await gcs.read(f"{output}/0/items/_METADATA"))
        assert (header["source_step"], header["quantization"], header["force_unroll"]) == (9, "int8", True)
        assert header["source_metadata"]["step"] == 9

    on_loop(emulator, scenario)


# --- jetstream and benchmark ----------------------------------------------------------------------


def jetstream_argv(parameters: str) -> list[str]:
    script = f"python3 -m MaxText.maxengine_server base.yml model_name=m load_parameters_path={parameters}"
    return ["bash", "-c", script]


async def commit_fake_step(gcs: RecordingGcs, step_dir: str) -> None:
    await gcs.write(f"{step_dir}/items/_METADATA", b"{}")
    await gcs.write(f"{step_dir}/{COMMIT_MARKER}", b"ok")


def test_jetstream_warms_up_then_serves_generate_until_stopped(emulator, base):
    env = {
        "PATHWAYS_TESTING_WARMUP_SECONDS": "600",
        "PATHWAYS_TESTING_TTFT_MS": "30",
        "PATHWAYS_TESTING_TPOT_MS": "4",
    }

    async def scenario(gcs: RecordingGcs):
        await commit_fake_step(gcs, f"{base}/serving/checkpoints/0")
        box = container(gcs, jetstream_argv(f"{base}/serving/checkpoints/0/items"), env)
        task = asyncio.create_task(run_program(box))

        async def published() -> bool:
            return 8000 in box.ports

        await eventually(published)
        assert box.ports[9000] == box.ports[8000]
        url = f"http://127.0.0.1:{box.ports[8000]}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/healthcheck") as response:
                assert response.status == 500
            async with http.post(f"{url}/generate", json={"prompt": "hi", "max_tokens": 3}) as response:
                assert response.status == 503

            async def healthy() -> bool:
                async with http.get(f"{url}/healthcheck") as response:
                    return response.status == 200

            await eventually(healthy)
            started = time.perf_counter()
            request = {"prompt": "tpu pod slice", "max_tokens": 5}
            async with http.post(f"{url}/generate", json=request) as response:
                assert response.status == 200
                body = await response.json()
            elapsed = time.perf_counter() - started
            assert body == {"response": "tpu pod slice tpu pod"}
            assert elapsed >= 0.030 + 4 * 0.004
            async with http.post(f"{url}/generate", json={"max_tokens": 5}) as response:
                assert response.status == 400

        await cancel(task)
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", box.ports[8000])

    on_loop(emulator, scenario)


def test_jetstream_refuses_parameters_from_an_uncommitted_step(emulator, base):
    async def scenario(gcs: RecordingGcs):
        await gcs.write(f"{base}/serving/checkpoints/0/items/_METADATA", b"{}")
        box = container(gcs, jetstream_argv(f"{base}/serving/checkpoints/0/items"))
        assert await run_program(box) == 1
        assert box.lines_with("Found incomplete checkpoint")
        assert box.ports == {}

    on_loop(emulator, scenario)


def test_benchmark_measures_the_server_and_uploads_a_jetstream_result(emulator, base):
    server_env = {
        "PATHWAYS_TESTING_WARMUP_SECONDS": "0",
        "PATHWAYS_TESTING_TTFT_MS": "20",
        "PATHWAYS_TESTING_TPOT_MS": "1",
    }
    script = (
        "python3 JetStream/benchmarks/benchmark_serving.py --server jetstream-svc --port 9000 "
        "--num-prompts 6 --max-output-length 8 --model llama2-7b --save-result "
        f"--request-rate 200 && gsutil -m cp result.json {base}/results/"
    )

    async def scenario(gcs: RecordingGcs):
        server = container(gcs, ["python3", "-m", "MaxText.maxengine_server"], server_env)
        task = asyncio.create_task(run_program(server))

        async def ready() -> bool:
            return bool(server.lines_with("server is ready"))

        await eventually(ready)
        # The Service exposes only jetstream-http: the benchmark's port 9000 falls back to 8000.
        bench = container(gcs, ["bash", "-c", script], services={"jetstream-svc": {8000: server.ports[8000]}})
        try:
            assert await run_program(bench) == 0
        finally:
            await cancel(task)
        result = json.loads(await gcs.read(f"{base}/results/result.json"))
        metrics = result["metrics"]
        assert set(metrics) == set(METRIC_KEYS)
        assert metrics["completed"] == 6
        assert metrics["total_output_tokens"] == 6 * 8
        assert metrics["mean_ttft_ms"] >= 20
        assert metrics["mean_tpot_ms"] >= 1
        assert metrics["p99_ttft_ms"] >= metrics["median_ttft_ms"]
        assert metrics["request_throughput"] == pytest.approx(6 / metrics["duration"])
        assert result["dimensions"]["num_prompts"] == "6" and result["dimensions"]["model"] == "llama2-7b"
        assert bench.lines_with(f"result saved to {base}/results/result.json")

    on_loop(emulator, scenario)


def test_benchmark_fails_when_the_server_cannot_be_reached(emulator):
    async def scenario(gcs: RecordingGcs):
        box = container(gcs, ["python3", "benchmark_serving.py", "--server", "nowhere"])
        assert await run_program(box) == 1
        assert box.lines_with("cannot connect to nowhere:9000")

    on_loop(emulator, scenario)


# --- choosing a stand-in --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "env", "image", "expected"),
    [
        (["python3", "-m", "MaxText.train", "base.yml", "run_name=x"], {}, "maxtext", "training"),
        (["python3", "MaxText/train.py", "steps=5"], {}, "maxtext", "training"),
        (["bash", "-c", "cd /app && python3 train.py --steps 100"], {}, "python:3.11", "training"),
        (["python3", "-m", "MaxText.generate_param_only_checkpoint", "run_name=train"], {}, "", "conversion"),
        (["python3", "-m", "MaxText.maxengine_server", "base.yml"], {}, "maxtext", "jetstream"),
        (["model_name=llama2-70b", "load_parameters_path=gs://b/x"], {},
         "us-docker.pkg.dev/cloud-tpu-images/inference/jetstream-pathways:v0.2.0", "jetstream"),
        ([], {}, "us-docker.pkg.dev/cloud-tpu-images/inference/jetstream-http:v0.2.3", "idle"),
        (["sh", "-c", "python3 benchmark_serving.py && gsutil cp r gs://b/"], {}, "", "benchmark"),
        (["bash", "-c", "exit 3"], {}, "busybox", "exit"),
        (["--gcs_scratch_location=gs://b/train.py"], {}, f"{PATHWAYS_IMAGES}/server", "idle"),
        ([], {}, f"{PATHWAYS_IMAGES}/proxy_server:latest", "idle"),
        (["python3", "serve.py", "base_output_directory=gs://b/jetstream"], {}, "python:3.11", "idle"),
        (["python3", "-m", "MaxText.train"], {"PATHWAYS_TESTING_PROGRAM": "Benchmark"}, "mt", "benchmark"),
        (["python3", "-m", "maxtext.trainers.pre_train.train", "src/maxtext/configs/base.yml"], {}, "maxtext", "training"),
        (["python3", "-m", "maxtext.utils.generate_param_only_checkpoint", "src/maxtext/configs/base.yml"], {}, "", "conversion"),
    ],
)
def test_program_is_chosen_by_env_then_command_then_image(argv, env, image, expected):
    assert program_name(argv, env, image) == expected
    assert choose_program(argv, env, image) is PROGRAMS[expected]


@pytest.mark.parametrize(
    ("layout", "argv", "missing"),
    [
        ("current", ["python3", "-m", "MaxText.train", "MaxText/configs/base.yml"], "ModuleNotFoundError: No module named 'MaxText'"),
        ("current", ["python3", "-m", "maxtext.trainers.pre_train.train", "MaxText/configs/base.yml"],
         "FileNotFoundError: [Errno 2] No such file or directory: 'MaxText/configs/base.yml'"),
        ("legacy", ["python3", "-m", "maxtext.utils.generate_param_only_checkpoint", "MaxText/configs/base.yml"],
         "ModuleNotFoundError: No module named 'maxtext'"),
        ("legacy", ["python3", "-m", "MaxText.generate_param_only_checkpoint", "MaxText/configs/base.yml"], None),
        ("current", ["python3", "-m", "maxtext.trainers.pre_train.train", "src/maxtext/configs/base.yml", "run_name=MaxText/x"], None),
        ("", ["python3", "-m", "MaxText.train", "MaxText/configs/base.yml"], None),
    ],
)
def test_an_image_of_one_maxtext_layout_has_nothing_of_the_other(emulator, layout, argv, missing):
    env = {MAXTEXT_LAYOUT_ENV: layout}
    assert missing_from_the_image(argv, env) == missing

    async def scenario(gcs: RecordingGcs):
        box = container(gcs, argv, env)
        assert await choose_program(argv, env, "maxtext")(box.context) == 1
        assert box.lines_with(missing)

    if missing:
        on_loop(emulator, scenario)


def test_an_unknown_program_name_and_exit_n_run_as_documented(emulator):
    async def scenario(gcs: RecordingGcs):
        wrong = container(gcs, ["true"], {"PATHWAYS_TESTING_PROGRAM": "trainer"})
        assert await choose_program(["true"], wrong.context.env, "x")(wrong.context) == 1
        assert wrong.lines_with("'trainer' names no stand-in")

        box = container(gcs, ["/bin/bash", "-ec", "echo starting; exit 3"])
        assert await run_program(box) == 3

        idle = container(gcs, ["/pathways/rm", "--server_port=29001"])
        task = asyncio.create_task(PROGRAMS["idle"](idle.context))
        await asyncio.sleep(0.05)
        assert not task.done() and len(idle.logs) == 1
        await cancel(task)

    on_loop(emulator, scenario)


def test_a_gated_exit_n_runs_until_its_object_exists(emulator, base):
    gate = f"{base}/release"

    async def scenario(gcs: RecordingGcs):
        box = container(gcs, ["bash", "-c", "exit 3"], {"PATHWAYS_TESTING_EXIT_WHEN": gate})
        task = asyncio.create_task(run_program(box))
        await eventually(lambda: asyncio.sleep(0, result=bool(box.lines_with("running until"))))
        await asyncio.sleep(1.2)  # more than two looks for the object
        assert not task.done()
        await gcs.write(gate, b"")
        assert await asyncio.wait_for(task, 5) == 3

        wrong = container(gcs, ["bash", "-c", "exit 0"], {"PATHWAYS_TESTING_EXIT_WHEN": "/tmp/release"})
        assert await run_program(wrong) == 1
        assert wrong.lines_with("not a gs:// object")

    on_loop(emulator, scenario)


def test_command_lines_are_read_in_maxtext_and_argparse_forms_and_inside_shell_scripts():
    argv = ["/bin/sh", "-o", "pipefail", "-c",
            "python3 x.py steps=5 --num-prompts=3 --request-rate 2 --save-result run_name=$RUN; "
            "gcloud storage cp out/*.json gs://b/results/"]  # fmt: skip
    tokens = command_tokens(argv, {"RUN": "r7"})
    params = parse_params(tokens, switches=["save-result"])
    assert params.values == {
        "steps": "5", "num_prompts": "3", "request_rate": "2", "save_result": "true", "run_name": "r7",
    }  # fmt: skip
    assert copy_destination(tokens) == ("out/*.json", "gs://b/results/")
    assert copy_destination(["cp", "a", "gs://b/c"]) == (None, None)  # plain cp is not an upload
    script = "# 1. start\nbash multi-node-serving.sh leader;\n\nvllm serve --port 8000 \\\n  --model=m \\\n  --seed 42\n"
    assert command_tokens(["/bin/sh", "-c", script]) == [
        "/bin/sh", "-c", ";", "bash", "multi-node-serving.sh", "leader", ";", ";", ";", "vllm", "serve", "--port", "8000", "--model=m", "--seed", "42", ";",
    ]  # a continued line is one command, a newline ends one


def test_percentiles_interpolate_like_numpy():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 99) == pytest.approx(3.97)
    assert percentile([7.0], 99) == 7.0


def test_a_ray_worker_of_a_multi_host_vllm_server_idles_on_the_vllm_image():
    """vLLM's multi-node-serving.sh worker joins the leader's Ray cluster; only the leader runs ``vllm serve``."""
    worker = ["/bin/sh", "-c", "bash /workspace/vllm/examples/ray_serving/multi-node-serving.sh worker --ray_address=$(LWS_LEADER_ADDRESS)\n"]
    assert program_name(worker, {}, "vllm/vllm-tpu:latest") == "idle"
    assert program_name(["/bin/sh", "-c", "bash multi-node-serving.sh leader; vllm serve --port 8000 --model=m"], {}, "vllm/vllm-tpu:latest") == "vllm"


def test_with_enable_autocheckpoint_sigterm_saves_the_last_completed_step_unless_killed_mid_save(emulator, base):
    """MaxText's ``enable_autocheckpoint`` (src/maxtext/common/checkpointing.py): a SIGTERM mid-run
    saves the step completed last, then the run stops; a SIGKILL in the middle of that save (the
    grace period over) leaves the step partial, and the next run resumes before it."""
    checkpoints = f"{base}/auto/checkpoints"
    argv = train_argv(base, "run_name=auto", "steps=40", "checkpoint_period=10", "enable_autocheckpoint=true")

    async def scenario(gcs: RecordingGcs):
        first = container(gcs, argv, {"PATHWAYS_TESTING_STEP_SECONDS": "5"})
        task = asyncio.create_task(run_program(first))
        await eventually(lambda: asyncio.sleep(0, bool(first.lines_with("completed step: 13,"))))
        task.cancel()  # SIGTERM: the grace period lets the save finish
        with pytest.raises(asyncio.CancelledError):
            await task
        [said] = first.lines_with("preemption reached at step")
        step = int(said.split()[4].rstrip(":"))
        assert step >= 13 and first.lines_with("Job is preempted.")
        assert await gcs.exists(f"{checkpoints}/{step}/{COMMIT_MARKER}")

        second = container(gcs, argv, {"PATHWAYS_TESTING_STEP_SECONDS": "5", "PATHWAYS_TESTING_SAVE_SECONDS": "800"})
        task = asyncio.create_task(run_program(second))
        await eventually(lambda: asyncio.sleep(0, bool(second.lines_with("completed step: 21,"))))
        task.cancel()  # SIGTERM: it saves the step it completed last (21 or one after, on a busy machine)
        await eventually(lambda: asyncio.sleep(0, bool(second.lines_with("preemption reached at step"))))
        [said] = second.lines_with("preemption reached at step")
        cut = int(said.split()[4].rstrip(":"))
        await eventually(lambda: gcs.exists(f"{checkpoints}/{cut}/{METADATA_FILE}"))
        await cancel(task)  # SIGKILL in the middle of the save
        assert cut >= 21 and second.lines_with(f"restoring from this run's directory step {step}")
        assert not await gcs.exists(f"{checkpoints}/{cut}/{COMMIT_MARKER}")

        third = container(gcs, argv)
        assert await run_program(third) == 0
        assert third.lines_with("restoring from this run's directory step") == ["restoring from this run's directory step 20"]

    on_loop(emulator, scenario)


class Slices:
    """A head's slices as the local cluster's Pathways servers show them to the program."""

    def __init__(self) -> None:
        self.handles_losses, self.losses, self.ready = False, 0, True

    def all_ready(self) -> bool:
        return self.ready


def test_with_elastic_enabled_a_lost_slice_is_ridden_out_in_process_from_the_newest_committed_step(emulator, base):
    """MaxText's elastic retry (maxtext.utils.elastic_utils, pause/resume): the step running when a
    slice is lost fails, the newest step without ``commit_success`` is deleted, the program waits
    until every slice is back, restores the newest committed step and goes on, in the same process."""
    checkpoints = f"{base}/elastic/checkpoints"
    argv = train_argv(base, "run_name=elastic", "steps=30", "checkpoint_period=10", "elastic_enabled=true")

    async def scenario(gcs: RecordingGcs):
        box = container(gcs, argv, {"PATHWAYS_TESTING_STEP_SECONDS": "5", "PATHWAYS_TESTING_SAVE_SECONDS": "400"})
        slices = Slices()
        box.context.slices = slices
        task = asyncio.create_task(run_program(box))
        await eventually(lambda: gcs.exists(f"{checkpoints}/10/{METADATA_FILE}"))  # the save of step 10 has begun
        slices.losses, slices.ready = 1, False
        await eventually(lambda: asyncio.sleep(0, bool(box.lines_with("Elastic utils: Checking for incomplete checkpoint"))))
        assert slices.handles_losses and not task.done()
        slices.ready = True
        assert await task == 0
        assert box.lines_with("Elastic utils: Elastic training enabled.") and box.lines_with("Elastic Retry Enabled")
        assert box.lines_with("No commit_success file found. Deleting ") or box.lines_with("Found commit_success file. Keeping ")
        restored = box.lines_with("restoring from this run's directory step")
        assert restored == [f"restoring from this run's directory step {restored[0].rsplit(' ', 1)[1]}"] and len(restored) == 1
        assert restored[0].endswith((" 0", " 10"))  # the newest committed step when the slice was lost
        assert await gcs.exists(f"{checkpoints}/29/{COMMIT_MARKER}")

        spent = container(gcs, [*argv, "run_name=spent", "elastic_max_retries=0"], {"PATHWAYS_TESTING_STEP_SECONDS": "50"})
        spent.context.slices = gone = Slices()
        task = asyncio.create_task(run_program(spent))
        await eventually(lambda: asyncio.sleep(0, bool(spent.lines_with("completed step:"))))
        gone.losses = 1
        assert await task == 1 and spent.lines_with("elastic retries are spent")

    on_loop(emulator, scenario)
