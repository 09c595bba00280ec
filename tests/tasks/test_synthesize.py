"""The synthesize stage: resumable after SIGKILL, stopped cleanly by SIGTERM or its runner's end (its teacher too, never
an orphan), retried on transient endpoint failures, rate-limited."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest
import yaml
from fastapi import Request
from fastapi.responses import JSONResponse

from tasks import synthesize
from tasks.runtime.episode_specs import read_specs
from tasks.runtime.stage import STOP_GRACE
from wander import load_environment
from wander.core.atomic_io import read_jsonl
from wander.core.journal import Journal
from wander.core.policy import Reply
from wander.core.process_tree import WATCH_PID_ENV, alive, descendants
from wander.policies.openai_policy import PolicyRequestError
from wander.policies.openai_server import serve_in_thread, teacher_app

REPO = Path(__file__).resolve().parents[2]


def episodes_of(params: dict) -> list[dict]:
    return read_jsonl(Path(params["layout"]["episodes"]) / "episodes.jsonl")


def with_specs(params_at, root: Path, shared_params: dict) -> dict:
    """Smoke params under `root`, with a copy of the shared episode specs."""
    params = params_at(root)
    shutil.copytree(shared_params["layout"]["datasets"], params["layout"]["datasets"])
    return params


def test_teacher_plays_every_spec_once_in_order(shared_params: dict, synthesized: dict) -> None:
    specs = read_jsonl(Path(shared_params["layout"]["datasets"]) / "train.jsonl")
    records = episodes_of(shared_params)
    assert [r["seed"] for r in records] == [s["seed"] for s in specs]
    assert all(r["spec"] == s for r, s in zip(records, specs, strict=True))
    assert synthesized["played"] == len(specs) and synthesized["resumed"] == 0 and synthesized["retries"] == 0
    teacher = synthesized["teacher"]
    assert teacher["format"] == 1.0 and teacher["invalid_games"] == 0.0 and teacher["win"] > teacher["loss"]
    # DVC's metrics file: a flat headline; the details file (a plain out) holds the per-stratum breakdown.
    metrics_dir = Path(shared_params["layout"]["metrics"])
    headline = json.loads((metrics_dir / "synthesize.json").read_text())
    assert headline["episodes"] == len(specs) and headline["teacher_win"] == teacher["win"]
    assert all(isinstance(v, (int, float)) for v in headline.values()) and len(headline) <= 8
    details = json.loads((Path(shared_params["layout"]["details"]) / "synthesize.json").read_text())
    assert details == synthesized
    assert sum(s["episodes"] for s in details["per_stratum"].values()) == len(specs)
    assert not any(
        (Path(shared_params["layout"]["work"]) / "synthesize").glob("*.jsonl")
    )  # journal cleaned up


@pytest.mark.usefixtures("stages_in_own_processes")  # its assertions read the stage's process tree
def test_killed_synthesis_resumes_without_loss_or_duplicates(
    tmp_path: Path, params_at, stage_config, shared_params: dict, generated: dict
) -> None:
    params = with_specs(params_at, tmp_path / "killed", shared_params)
    # Small journaled batches, paced so the kill lands mid-run.
    params["synthesize"].update(batch_size=4, requests_per_second=30.0)
    params["synthesize"]["teacher"]["max_concurrency"] = 4
    params_file = tmp_path / "params.yaml"
    params_file.write_text(yaml.safe_dump(params))
    config = stage_config("synthesize", params)
    journal = synthesize.journal_path(config)
    output = Path(config.layout.episodes) / "episodes.jsonl"

    proc = subprocess.Popen(
        [sys.executable, "-m", "tasks.synthesize", "--params", str(params_file), "--no-mlflow"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120
    try:
        while not journal.exists() or journal.read_text().count("\n") < 12:
            assert proc.poll() is None, f"synthesis ended before the kill:\n{proc.stdout.read()}"
            assert time.monotonic() < deadline, "no journaled episode after 120 s"
            time.sleep(0.02)
        helpers = descendants(proc.pid)  # the forked embedded teacher
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    # Its teacher does not outlive it: it sees its parent end and stops by itself (no one else signals it).
    assert helpers, "the stage started no teacher process"
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in helpers) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in helpers if alive(pid)]
    for pid in left:  # never leave one behind for the rest of the suite
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes of the killed stage still alive 5 s later: {left}"
    assert not output.exists()
    journaled = [json.loads(line) for line in journal.read_text().splitlines()]
    total = len(read_jsonl(Path(config.layout.datasets) / "train.jsonl"))
    assert 12 <= len(journaled) < total
    with journal.open("a") as f:
        f.write('{"seed": 1, "spec": {"se')  # the torn line a kill in the middle of an append leaves

    resumed = synthesize.run(stage_config("synthesize", params, requests_per_second=None))
    assert resumed["resumed"] == len(journaled)
    assert resumed["played"] == total - len(journaled)
    records = read_jsonl(output)
    seeds = [r["seed"] for r in records]
    assert len(seeds) == len(set(seeds)) == total
    by_seed = {r["seed"]: r for r in records}
    assert all(by_seed[r["seed"]] == r for r in journaled)  # what was done before the kill is kept as it was
    assert not journal.exists()

    # And the data equals what an uninterrupted run writes.
    straight = with_specs(params_at, tmp_path / "straight", shared_params)
    synthesize.run(stage_config("synthesize", straight, batch_size=4, max_concurrency=4))
    assert episodes_of(straight) == records


def start_synthesis(
    tmp_path: Path, params_at, shared_params: dict, env: dict | None = None
) -> subprocess.Popen:
    """`python -m tasks.synthesize` on the shared specs, paced so that a stop lands while the teacher plays."""
    params = params_at(tmp_path)
    shutil.copytree(shared_params["layout"]["datasets"], params["layout"]["datasets"])
    params["synthesize"].update(batch_size=4, requests_per_second=20.0)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    environ = {**os.environ, **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "tasks.synthesize", "--params", "params.yaml"],
        cwd=tmp_path,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_until_playing(proc: subprocess.Popen, tmp_path: Path) -> list[int]:
    """Wait until a batch is journaled; return the stage's helper processes (its forked teacher)."""
    # A bound for a busy machine: on an idle one the first batch is journaled ~10 s after the start.
    deadline = time.monotonic() + 600
    while not any(p.read_text().count("\n") >= 4 for p in tmp_path.glob("data/work/synthesize/*.jsonl")):
        assert proc.poll() is None, f"synthesis ended before the stop:\n{proc.stdout.read()}"
        assert time.monotonic() < deadline, "no journaled episode after 600 s"
        time.sleep(0.05)
    helpers = descendants(proc.pid)
    assert helpers, "the stage started no teacher process"
    return helpers


# The stage's promise: it unwinds within STOP_GRACE, then leaves anyway; plus a margin for the exit itself on two
# busy cores (a CI run of 2026-11-26 took over 5 s to exit after "a rerun resumes from there" was printed).
STOPPED_WITHIN = STOP_GRACE + 5.0


def assert_stopped(proc: subprocess.Popen, helpers: list[int], tmp_path: Path, within: float) -> str:
    """The stage exits 143 within `within` seconds, its helpers are gone, its MLflow run is KILLED."""
    start = time.monotonic()
    try:
        out, _ = proc.communicate(timeout=within)
    finally:
        proc.kill()
    seconds = time.monotonic() - start
    left = [pid for pid in helpers if alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert not left, f"helpers alive after the stage ended: {left}"
    assert "synthesize: stopped by SIGTERM" in out and "a rerun resumes from there" in out, out
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow/mlflow.db'}")
    (run,) = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert run.info.status == "KILLED"
    assert list(tmp_path.glob("data/work/synthesize/*.jsonl")), "the journal is kept for the rerun"
    return f"{seconds:.1f} s"


@pytest.mark.slow
@pytest.mark.usefixtures("stages_in_own_processes")  # its assertions read the stage's process tree
def test_sigterm_unwinds_a_stage_its_teacher_stopped_its_run_killed(
    tmp_path: Path, params_at, shared_params: dict, generated: dict
) -> None:
    proc = start_synthesis(tmp_path, params_at, shared_params)
    helpers = wait_until_playing(proc, tmp_path)
    proc.send_signal(signal.SIGTERM)  # the stage alone: the teacher hears of it from the stage
    assert_stopped(proc, helpers, tmp_path, within=STOPPED_WITHIN)


@pytest.mark.slow
@pytest.mark.usefixtures("stages_in_own_processes")  # its assertions read the stage's process tree
def test_a_stage_stops_itself_when_its_runner_dies_even_by_sigkill(
    tmp_path: Path, params_at, shared_params: dict, generated: dict
) -> None:
    runner = subprocess.Popen(["sleep", "600"])  # stands for the flow, which exports its pid to the stages
    try:
        proc = start_synthesis(tmp_path, params_at, shared_params, {WATCH_PID_ENV: str(runner.pid)})
        helpers = wait_until_playing(proc, tmp_path)
        runner.kill()
        runner.wait()
        assert_stopped(proc, helpers, tmp_path, within=STOPPED_WITHIN)
    finally:
        runner.kill()
        runner.wait()


def flaky_teacher(failures: list[int], seen: dict, fail_after: int | None = None) -> object:
    """The embedded teacher behind a front answering the first requests with `failures` (HTTP statuses),
    and every request after the first `fail_after` with 500."""
    app = teacher_app(load_environment("tictactoe"))

    @app.middleware("http")
    async def fail_some(request: Request, call_next):  # noqa: ANN202
        if request.url.path.endswith("/chat/completions"):
            seen["auth"].add(request.headers.get("authorization"))
            seen["requests"] += 1
            n = seen["requests"]
            status = failures[n - 1] if n <= len(failures) else None
            if fail_after is not None and n > fail_after:
                status = 500
            if status is not None:
                body = {
                    "error": {"message": f"injected {status}", "type": "test", "param": None, "code": None}
                }
                return JSONResponse(body, status_code=status, headers={"Retry-After": "0"})
        return await call_next(request)

    return app


def test_transient_endpoint_failures_are_retried(
    tmp_path: Path,
    params_at,
    stage_config,
    shared_params: dict,
    synthesized: dict,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WANDER_TEST_TEACHER_KEY", "sk-test-secret")
    params = with_specs(params_at, tmp_path, shared_params)
    seen = {"auth": set(), "requests": 0}
    with serve_in_thread(flaky_teacher([500, 429, 503, 429], seen)) as url:
        metrics = synthesize.run(
            stage_config(
                "synthesize",
                params,
                teacher_url=url,
                api_key_env="WANDER_TEST_TEACHER_KEY",
                backoff_base=0.01,
            )
        )
    assert metrics["retries"] >= 4 and metrics["played"] == synthesized["played"]
    # Retried requests are the same requests: the games equal those of the undisturbed embedded teacher.
    assert episodes_of(params) == episodes_of(shared_params)
    assert seen["auth"] == {"Bearer sk-test-secret"}  # the key comes from the named variable...
    written = "".join(p.read_text() for p in Path(tmp_path).rglob("*.json*"))
    assert "sk-test-secret" not in written  # ...and is written nowhere


def test_endpoint_that_keeps_failing_stops_the_stage_and_keeps_finished_batches(
    tmp_path: Path, params_at, stage_config, shared_params: dict, generated: dict
) -> None:
    params = with_specs(params_at, tmp_path, shared_params)
    seen = {"auth": set(), "requests": 0}
    # A batch of 4 games takes 4 to 20 requests (a mid-game start can end on its first move): the endpoint
    # fails for good after 22, so at least one batch finishes and the stage stops long before the split's end.
    with serve_in_thread(flaky_teacher([], seen, fail_after=22)) as url:
        config = stage_config(
            "synthesize",
            params,
            teacher_url=url,
            batch_size=4,
            max_concurrency=4,
            max_retries=1,
            backoff_base=0.0,
        )
        with pytest.raises(PolicyRequestError, match="failed after 2 attempts: HTTP 500"):
            synthesize.run(config)
    kept = len(Journal(synthesize.journal_path(config)).load())
    assert kept >= 4 and kept % 4 == 0  # whole batches only, each journaled as it finished
    assert kept < len(read_specs(config.layout.datasets, "train"))
    assert not (Path(config.layout.episodes) / "episodes.jsonl").exists()


def test_rate_limit_spaces_requests() -> None:
    clock = {"now": 0.0}
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock["now"] += seconds

    calls: list[int] = []

    def policy(conversations: list) -> list[Reply]:
        calls.append(len(conversations))
        return [Reply("x") for _ in conversations]

    limited = synthesize.RateLimited(policy, rate=4.0, burst=2, clock=lambda: clock["now"], sleep=sleep)
    assert len(limited([[{"role": "user", "content": "hi"}]] * 5)) == 5
    assert calls == [2, 2, 1]
    assert waits == [0.5, 0.5]  # 2 requests at 4/s take half a second
    limited([[{"role": "user", "content": "hi"}]])
    assert waits[-1] == pytest.approx(0.25) and clock["now"] == pytest.approx(1.25)


def test_journal_drops_a_torn_tail_and_keeps_the_first_record(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    assert journal.load() == {}
    journal.append([{"seed": 1, "v": "a"}, {"seed": 2, "v": "b"}])
    journal.append([{"seed": 1, "v": "again"}])
    with journal.path.open("a") as f:
        f.write('{"seed": 3, "v"')
    assert journal.load() == {1: {"seed": 1, "v": "a"}, 2: {"seed": 2, "v": "b"}}
    assert journal.path.read_text().endswith("\n")  # the torn tail is cut off the file
    journal.append([{"seed": 3, "v": "c"}])
    assert set(journal.load()) == {1, 2, 3}


def synthesize_output(params: dict, root: Path, *extra: str) -> str:
    """stderr of `python -m tasks.synthesize` on `params`, run as DVC runs it."""
    params_file = root / "params.yaml"
    params_file.write_text(yaml.safe_dump(params))
    done = subprocess.run(
        [sys.executable, "-m", "tasks.synthesize", "--params", str(params_file), "--no-mlflow", *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "WANDER_LOG_LEVEL"},  # the default level
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def test_synthesis_logs_a_line_per_tenth_and_no_line_per_request(
    tmp_path: Path, params_at, shared_params: dict, generated: dict
) -> None:
    params = with_specs(params_at, tmp_path, shared_params)
    quiet = synthesize_output(params, tmp_path)
    specs = read_jsonl(Path(params["layout"]["datasets"]) / "train.jsonl")
    size, n = params["synthesize"]["batch_size"], len(specs)
    batches = -(-n // size)
    assert "HTTP Request" not in quiet and "POST /v1" not in quiet and "Uvicorn running" not in quiet
    ends = [min((i + 1) * size, n) for i in range(batches)]
    tenths = sum(10 * a // n != 10 * b // n or b == n for a, b in zip([0, *ends], ends, strict=False))
    assert sum("episodes (" in line for line in quiet.splitlines()) == tenths <= 11  # one line per tenth
    assert f"{n}/{n} episodes (100%)" in quiet  # the last batch always logs
    assert len(quiet.splitlines()) < 20

    loud = synthesize_output(params, tmp_path, "--verbose")
    assert loud.count("HTTP Request: POST") >= batches  # the switch brings the request lines back
    assert loud.count("POST /v1/chat/completions") >= batches  # and the embedded teacher's access lines


def test_tree_mode_asks_the_embedded_teacher_at_every_position_of_its_tree_and_curate_keeps_every_game(
    tmp_path: Path, params_at, stage_config, base_model: Path
) -> None:
    from tasks import curate

    params = params_at(tmp_path)  # no episode specs: the tree is not the split's games
    shutil.copytree(base_model, params["layout"]["base_model"])
    metrics = synthesize.run(stage_config("synthesize", params, mode="tree", votes=2))
    records = episodes_of(params)
    env = load_environment(**{"name": "tictactoe", **params["env"]["tictactoe"]})
    asked = {
        json.dumps(c[:-1], sort_keys=True) for r in records for c in env.training_conversations(r["messages"])
    }
    assert metrics["episodes"] == metrics["played"] == len(records) > 300 and metrics["resumed"] == 0
    assert metrics["requests"] == 2 * len(asked)  # each position once, `votes` times
    # Two votes of a teacher that slips half the time: some positions get none that keeps the value (the profile
    # asks eight), and every game through one of them has a value-losing move.
    verified = [r for r in records if r["values"]["move_optimality"] == 1.0]
    assert len(records) / 2 < len(verified) < len(records) and metrics["teacher"]["invalid_games"] == 0.0
    assert all(r["state"]["outcome"] in ("win", "draw") for r in verified)
    kept = curate.run(stage_config("curate", params))
    assert kept["kept"] == len(verified)  # and each replays from its spec (curate checks it)


def test_tree_mode_is_refused_in_one_line_for_an_env_without_the_tree(
    tmp_path: Path, params_at, stage_config
) -> None:
    from wander.core.capabilities import MissingCapability

    params = params_at(tmp_path)
    params["env"]["name"] = "reverse_text"
    with pytest.raises(
        MissingCapability, match="synthesize.mode: tree needs .* DecisionTree .* set synthesize.mode: split"
    ):
        synthesize.run(stage_config("synthesize", params, mode="tree"))
    assert not Path(params["layout"]["episodes"]).exists()


def test_tree_mode_plays_the_whole_tree_so_a_prefix_of_the_split_is_refused(
    params_at, stage_config, tmp_path
) -> None:
    with pytest.raises(ValueError, match="mode tree plays the whole tree: set it to null"):
        stage_config("synthesize", params_at(tmp_path), mode="tree", num_episodes=10)


def test_the_embedded_teacher_knows_the_generated_specs_whatever_the_envs_own_split_sizes(
    params_at, stage_config, tmp_path: Path
) -> None:
    # reasoning_gym's teacher looks a question up among its env's specs. Its splits at the generate stage's sizes
    # differ from those at the env's defaults (a split holds each question once, so which seed lands in which
    # stratum depends on what the held-out splits took): the stage's env reads the generated specs, as GRPO's does.
    # At 7ffe194's loading the teacher refused a question it did not know (HTTP 422) and the stage failed.
    from tasks import generate

    params = params_at(tmp_path)
    tasks = "spell_backward,basic_arithmetic,letter_counting,word_sorting"  # the llm-reasoning profile's mix
    params["env"].update(name="reasoning_gym", reasoning_gym={"tasks": tasks, "num_groups": 4})
    params["generate"].update(num_train=800, num_eval=100, num_test=100)
    generate.run(stage_config("generate", params))
    metrics = synthesize.run(stage_config("synthesize", params, num_episodes=None))
    specs = read_jsonl(Path(params["layout"]["datasets"]) / "train.jsonl")
    played = episodes_of(params)
    assert len(played) == len(specs) == 800 and metrics["played"] == 800
    assert [r["spec"]["question"] for r in played] == [s["question"] for s in specs]
    defaults = load_environment("reasoning_gym", tasks=tasks, num_groups=4)
    assert {s["question"] for s in specs} - {r["question"] for r in defaults.get_dataset("train")}, (
        "the generated specs are all in the defaults' train split: the test checks nothing"
    )
