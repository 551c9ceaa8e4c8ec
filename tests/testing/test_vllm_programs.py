"""The vLLM stand-ins run for real: ``vllm serve`` on loopback, ``vllm bench serve`` measuring it."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Callable

import aiohttp
import pytest

from pathways_airflow.checkpoints import COMMIT_MARKER
from pathways_airflow_testing.gcs import AsyncGcs
from pathways_airflow_testing.programs import PROGRAMS, choose_program, program_name
from pathways_airflow_testing.programs.args import command_tokens
from pathways_airflow_testing.programs.benchmark import copy_destination
from pathways_airflow_testing.programs.vllm_bench import same_file, upload_object
from tests.support.programs import Container, base, cancel, container, emulator, on_loop

MODEL = "Qwen/Qwen3-30B-A3B"
FAST = {
    "PATHWAYS_TESTING_WARMUP_SECONDS": "0",
    "PATHWAYS_TESTING_TTFT_MS": "5",
    "PATHWAYS_TESTING_TPOT_MS": "1",
}
UPLOAD = (
    "python3 -c 'import sys; from google.cloud import storage; "
    'bucket, _, name = sys.argv[2][5:].partition("/"); '
    "storage.Client().bucket(bucket).blob(name).upload_from_filename(sys.argv[1])'"
)


async def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def serve_argv(*flags: str) -> list[str]:
    return ["vllm", "serve", MODEL, "--host", "0.0.0.0", "--port", "8000", "--tensor-parallel-size", "8",
            *flags]  # fmt: skip


def maxtext_flags(load_parameters_path: str) -> list[str]:
    maxtext = {"model_name": "qwen3-30b-a3b", "load_parameters_path": load_parameters_path}
    return ["--hf-overrides", json.dumps({"architectures": ["MaxTextForCausalLM"]}),
            "--additional-config", json.dumps({"maxtext_config": maxtext})]  # fmt: skip


def bench_script(destination: str, *flags: str) -> str:
    bench = (
        "vllm bench serve --backend vllm --base-url http://vllm-svc:8000 --endpoint /v1/completions "
        f"--model {MODEL} --dataset-name random --num-prompts 6 --output-len 4 --input-len 16 "
        f"{' '.join(flags)} --save-result --result-dir /tmp/r --result-filename result.json"
    )
    return f"{bench} && {UPLOAD} /tmp/r/result.json {destination}"


async def start_server(gcs: AsyncGcs, argv: list[str], env: dict[str, str]) -> tuple[Container, asyncio.Task]:
    server = container(gcs, argv, env)
    task = asyncio.create_task(choose_program(argv, env, "vllm/vllm-tpu:latest")(server.context))

    await eventually(lambda: 8000 in server.ports)
    return server, task


async def run_bench(gcs: AsyncGcs, server: Container, script: str) -> tuple[Container, int]:
    bench = container(gcs, ["bash", "-c", script], services={"vllm-svc": {8000: server.ports[8000]}})
    program = choose_program(bench.context.argv, bench.context.env, "vllm/vllm-tpu:latest")
    assert program is PROGRAMS["vllm_bench"]
    return bench, await asyncio.wait_for(program(bench.context), timeout=15)


def sse_events(body: str) -> list[str]:
    events = [event.strip() for event in body.split("\n\n") if event.strip()]
    assert all(event.startswith("data: ") for event in events)
    return [event.removeprefix("data: ") for event in events]


# --- choosing the stand-ins -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "image", "expected"),
    [
        (serve_argv(), "python:3.11", "vllm"),
        (["/usr/local/bin/vllm", "serve", MODEL, "--served-model-name", "jetstream"], "", "vllm"),
        (["vllm", "bench", "serve", "--result-dir", "benchmark_serving"], "", "vllm_bench"),
        (["python3", "-m", "vllm.entrypoints.cli.main", "serve", MODEL], "", "vllm"),
        (["python3", "-m", "vllm.entrypoints.cli.main", "bench", "serve"], "", "vllm_bench"),
        (["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", MODEL], "", "vllm"),
        ([], "vllm/vllm-tpu:latest", "vllm"),
        (["sleep", "infinity"], "us-docker.pkg.dev/p/r/vllm-tpu@sha256:abc", "vllm"),
        (["bash", "-c", bench_script("gs://b/x.json")], "vllm/vllm-tpu:latest", "vllm_bench"),
        (["bash", "-c", "pip list | grep vllm && python3 -m MaxText.maxengine_server"], "", "jetstream"),
        ([], "vllm/vllm-openai:latest", "idle"),
    ],
)
def test_vllm_commands_and_the_tpu_image_choose_the_vllm_stand_ins(argv, image, expected):
    assert program_name(argv, {}, image) == expected
    assert choose_program(argv, {}, image) is PROGRAMS[expected]


def test_the_upload_of_a_python_one_liner_is_found_like_gsutil_cp():
    tokens = command_tokens(["bash", "-c", bench_script("gs://bucket/x.json")])
    assert copy_destination(tokens) == ("/tmp/r/result.json", "gs://bucket/x.json")
    first = command_tokens(["sh", "-c", f"gsutil cp a.json gs://b/1.json; {UPLOAD} b.json gs://b/2.json"])
    assert copy_destination(first) == ("a.json", "gs://b/1.json")
    not_an_upload = ["python3", "-c", "print('upload')", "a.json", "gs://b/x.json"]
    assert copy_destination(not_an_upload) == (None, None)
    assert copy_destination(["echo", "-c", "upload_from_filename", "a", "gs://b/x"]) == (None, None)


def test_the_uploaded_file_must_be_the_one_vllm_saved():
    assert same_file("/tmp/r/result.json", "/tmp/r/*.json")
    assert same_file("/tmp/r/result.json", "r/result.json")  # relative to an unknown working directory
    assert not same_file("/tmp/r/result.json", "/tmp/other/result.json")
    assert upload_object("/tmp/r/x.json", "gs://b/dir/", "/tmp/r/x.json") == ("gs://b/dir/x.json", None)
    assert upload_object(None, None, "x.json") == (None, None)
    assert "No such file" in (upload_object("/tmp/r/y.json", "gs://b/y.json", "/tmp/r/x.json")[1] or "")
    assert "--save-result" in (upload_object("/tmp/r/x.json", "gs://b/x.json", None)[1] or "")


# --- vllm serve -----------------------------------------------------------------------------------


def test_the_server_refuses_an_uncommitted_maxtext_checkpoint_and_a_half_configured_plugin(emulator, base):
    items = f"{base}/serving/checkpoints/0/items"
    uncommitted = f"load_parameters_path={items}"

    async def scenario(gcs: AsyncGcs):
        await gcs.write(f"{items}/_METADATA", b"{}")
        refusals = {
            tuple(serve_argv(*maxtext_flags(items))): f"commit_success.txt; cannot load {uncommitted}",
            tuple(serve_argv(*maxtext_flags(items)[2:])): "does not set architectures",
            tuple(serve_argv("--additional-config", "{not")): "error: argument --additional-config: invalid",
            tuple(serve_argv("--hf-overrides", '{"architectures": "X"}')): "error: argument --hf-overrides:",
        }
        for argv, why in refusals.items():
            box = container(gcs, list(argv), FAST)
            assert await asyncio.wait_for(PROGRAMS["vllm"](box.context), timeout=5) == 1
            assert box.lines_with(why), box.logs
            assert box.ports == {}

    on_loop(emulator, scenario)


def test_the_server_listens_only_after_warm_up_then_speaks_vllms_openai_api(emulator, base):
    items = f"{base}/serving/checkpoints/0/items"
    env = {**FAST, "PATHWAYS_TESTING_WARMUP_SECONDS": "300", "PATHWAYS_TESTING_TTFT_MS": "20"}
    argv = serve_argv("--served-model-name", "qwen", *maxtext_flags(items))

    async def scenario(gcs: AsyncGcs):
        await gcs.write(f"{items}/_METADATA", b"{}")
        await gcs.write(f"{base}/serving/checkpoints/0/{COMMIT_MARKER}", b"ok")
        server = container(gcs, argv, env)
        task = asyncio.create_task(PROGRAMS["vllm"](server.context))
        await asyncio.sleep(0.1)  # 100 of the 300 simulated seconds: still loading
        assert server.ports == {} and server.lines_with("Loading weights from")

        await eventually(lambda: 8000 in server.ports)
        assert server.lines_with("Starting vLLM API server 0 on http://0.0.0.0:8000")
        url = f"http://127.0.0.1:{server.ports[8000]}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/health") as response:
                assert (response.status, await response.read()) == (200, b"")
            async with http.get(f"{url}/v1/models") as response:
                models = await response.json()
            assert models["object"] == "list" and len(models["data"]) == 1
            card = models["data"][0]
            assert (card["id"], card["root"], card["owned_by"]) == ("qwen", MODEL, "vllm")
            assert (card["object"], card["parent"], card["max_model_len"]) == ("model", None, 4096)
            assert isinstance(card["created"], int)

            request = {"model": "qwen", "prompt": "tpu pod slice", "max_tokens": 5, "ignore_eos": True}
            async with http.post(f"{url}/v1/completions", json=request) as response:
                assert response.status == 200
                body = await response.json()
            assert body["id"].startswith("cmpl-") and body["object"] == "text_completion"
            assert body["model"] == "qwen" and isinstance(body["created"], int)
            assert body["choices"] == [{"index": 0, "text": "tpu pod slice tpu pod", "logprobs": None,
                                        "finish_reason": "length", "stop_reason": None}]  # fmt: skip
            assert body["usage"] == {"prompt_tokens": 3, "total_tokens": 8, "completion_tokens": 5}

            streamed = {**request, "prompt": ["a b"], "max_tokens": 3, "stream": True,
                        "stream_options": {"include_usage": True}}  # fmt: skip
            async with http.post(f"{url}/v1/completions", json=streamed) as response:
                assert response.status == 200 and response.content_type == "text/event-stream"
                events = sse_events(await response.text())
            assert events[-1] == "[DONE]"
            chunks = [json.loads(event) for event in events[:-1]]
            tokens, usage = chunks[:-1], chunks[-1]
            assert [c["choices"][0]["text"] for c in tokens] == [" a", " b", " a"]
            assert [c["choices"][0]["finish_reason"] for c in tokens] == [None, None, "length"]
            assert len({c["id"] for c in chunks}) == 1
            assert all(c["object"] == "text_completion" for c in chunks)
            assert usage["choices"] == [] and usage["usage"] == {"prompt_tokens": 2, "total_tokens": 5,
                                                                 "completion_tokens": 3}  # fmt: skip

            without_usage = {key: value for key, value in streamed.items() if key != "stream_options"}
            async with http.post(f"{url}/v1/completions", json=without_usage) as response:
                events = sse_events(await response.text())
            assert len(events) == 3 + 1 and json.loads(events[-2])["choices"][0]["finish_reason"] == "length"

            async with http.post(f"{url}/v1/completions", json={**request, "model": MODEL}) as response:
                assert response.status == 404
                error = (await response.json())["error"]
            assert error == {"message": f"The model `{MODEL}` does not exist.", "type": "NotFoundError",
                             "param": "model", "code": 404}  # fmt: skip
            async with http.post(f"{url}/v1/completions", json={"prompt": 3}) as response:
                assert response.status == 400
                assert (await response.json())["error"]["type"] == "BadRequestError"

        await cancel(task)
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", server.ports[8000])

    on_loop(emulator, scenario)


# --- vllm bench serve -----------------------------------------------------------------------------


def test_the_benchmark_measures_the_server_and_uploads_vllms_flat_result(emulator, base):
    destination = f"{base}/results/x.json"
    script = bench_script(destination, "--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99.9 --save-detailed")

    async def scenario(gcs: AsyncGcs):
        server, task = await start_server(gcs, serve_argv(), FAST)
        try:
            bench, code = await run_bench(gcs, server, script)
        finally:
            await cancel(task)
        assert code == 0, bench.logs
        assert bench.lines_with(f"result saved to {destination}")
        assert bench.lines_with("============ Serving Benchmark Result ============")
        assert bench.lines_with("Successful requests:")[0].split() == ["Successful", "requests:", "6"]
        result = json.loads(await gcs.read(destination))
        assert list(result)[:10] == [
            "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
            "request_rate", "burstiness", "max_concurrency",
        ]  # fmt: skip
        assert (result["endpoint_type"], result["model_id"], result["tokenizer_id"]) == ("vllm", MODEL, MODEL)
        assert (result["request_rate"], result["burstiness"], result["max_concurrency"]) == ("inf", 1.0, None)
        assert (result["completed"], result["failed"], result["num_prompts"]) == (6, 0, 6)
        assert (result["total_input_tokens"], result["total_output_tokens"]) == (6 * 16, 6 * 4)
        assert result["output_lens"] == [4] * 6 and result["errors"] == [""] * 6
        assert all(len(itl) == 3 for itl in result["itls"]) and all(t > 0.004 for t in result["ttfts"])
        assert result["request_goodput"] is None
        assert result["request_throughput"] == pytest.approx(6 / result["duration"])
        for metric in ("ttft", "tpot", "itl", "e2el"):
            for stat in ("mean", "median", "std", "p50", "p99.9"):
                assert isinstance(result[f"{stat}_{metric}_ms"], float)
        assert "p99_ttft_ms" not in result
        assert result["median_ttft_ms"] >= 5 and result["mean_itl_ms"] >= 1
        assert result["mean_e2el_ms"] >= result["mean_ttft_ms"] + 3 * 1
        assert result["p99.9_ttft_ms"] >= result["median_ttft_ms"]
        assert 1 <= result["max_concurrent_requests"] <= 6 and result["max_output_tokens_per_s"] >= 1

    on_loop(emulator, scenario)


def test_failed_requests_are_recorded_not_fatal_and_concurrency_is_capped(emulator, base):
    failing = f"{base}/results/failing.json"
    capped = f"{base}/results/capped.json"

    async def scenario(gcs: AsyncGcs):
        env = {**FAST, "PATHWAYS_TESTING_FAILED_REQUESTS": "2"}
        server, task = await start_server(gcs, serve_argv(), env)
        try:
            bench, code = await run_bench(gcs, server, bench_script(failing))
            assert code == 0, bench.logs
            assert bench.lines_with("Failed requests during benchmark run detected")
            result = json.loads(await gcs.read(failing))
            assert (result["completed"], result["failed"]) == (4, 2)
            # without --save-detailed vLLM keeps none of the per-request lists
            assert not {"input_lens", "output_lens", "ttfts", "itls", "errors"} & set(result)
            assert result["mean_ttft_ms"] > 0 and "mean_e2el_ms" not in result  # not selected
            assert result["p99_ttft_ms"] >= result["median_itl_ms"]

            script = bench_script(capped, "--max-concurrency 2 --request-rate 500")
            bench, code = await run_bench(gcs, server, script)
            assert code == 0, bench.logs
            result = json.loads(await gcs.read(capped))
            assert (result["max_concurrency"], result["request_rate"], result["completed"]) == (2, 500.0, 6)
            assert 1 <= result["max_concurrent_requests"] <= 2
            assert bench.lines_with("Maximum request concurrency:")
        finally:
            await cancel(task)

    on_loop(emulator, scenario)


def test_the_benchmark_refuses_bad_arguments_an_unknown_server_and_an_upload_of_another_file(emulator, base):
    async def scenario(gcs: AsyncGcs):
        server, task = await start_server(gcs, serve_argv(), FAST)
        try:
            script, elsewhere = bench_script("gs://b/x.json"), "/tmp/r/other.json gs"
            cases = {
                bench_script("gs://b/x.json", "--dataset-name sharegpt"): "needs --dataset-path",
                bench_script("gs://b/x.json", "--max-concurrency 0"): "--max-concurrency must be greater",
                bench_script("gs://b/x.json", "--dataset-name nope"): "argument --dataset-name: invalid",
                script.replace("vllm-svc", "nowhere"): "cannot connect to nowhere:8000",
                script.replace("/tmp/r/result.json gs", elsewhere): "/tmp/r/other.json: No such file",
            }
            for script, why in cases.items():
                bench, code = await run_bench(gcs, server, script)
                errors = [line for line in bench.lines_with(why) if line.startswith("error: ")]
                assert code == 1 and errors, bench.logs

            # Without --model the first served model is asked for; without an upload the JSON is logged.
            script = ("vllm bench serve --host vllm-svc --num-prompts 2 --output-len 2 --input-len 4 "
                      "--save-result --label nightly --seed 3")  # fmt: skip
            bench, code = await run_bench(gcs, server, script)
            assert code == 0, bench.logs
            assert bench.lines_with(f"First model name: {MODEL}, first model id: {MODEL}")
            saved = bench.lines_with("result saved to nightly-infqps-Qwen3-30B-A3B-")
            assert saved and saved[0].endswith(".json (not uploaded: no gs:// destination in the command)")
            logged = json.loads(bench.logs[bench.logs.index(saved[0]) + 1])
            assert (logged["label"], logged["endpoint_type"], logged["completed"]) == ("nightly", "openai", 2)
        finally:
            await cancel(task)

    on_loop(emulator, scenario)
