"""workplace_assistant's contract: deterministic workspaces and splits by seed, typed tools whose failures go
back to the model, episodes verified by the state they leave (partial credit, side effects penalised), any
reply scored without error, rubric metrics with intervals, the embedded teacher over the OpenAI protocol, and
an episode that resumes through the game API exactly as a rollout plays it."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envs.workplace_assistant.teacher import DONE, WorkplaceTeacher, read_request, tool_call, wrong_address
from envs.workplace_assistant.workspace import (
    bound,
    create_event,
    delete_email,
    find_contact,
    make_workspace,
    read_email,
    send_email,
)
from wander import load_environment
from wander.core.policy import UnplayableRequest
from wander.core.replay import replay_problems
from wander.policies.openai_policy import OpenAIPolicy
from wander.policies.openai_policy_config import OpenAIPolicyConfig
from wander.policies.openai_server import serve_in_thread, teacher_app

from ..scripted import Scripted

SMALL = {"num_train": 24, "num_eval": 12, "num_test": 12}
METRICS = {"task_reward", "state_checks", "side_effects", "completed", "format", "tool_calls", "tool_errors"}


@pytest.fixture(scope="module")
def env():
    return load_environment("workplace_assistant", **SMALL)


def first_spec(env, stratum: int, kind: str) -> dict:
    """The first spec of a stratum whose only goal is of `kind`."""
    for seed in range(1000):
        spec = env.make_spec(seed, stratum)
        goals = json.loads(spec["task"])
        if [g["kind"] for g in goals] == [kind]:
            return spec
    raise AssertionError(f"no {kind} task in stratum {stratum}")


def test_workspaces_are_seeded_and_every_stratum_is_its_number_of_tool_calls() -> None:
    assert make_workspace(5) == make_workspace(5) != make_workspace(6)
    env = load_environment("workplace_assistant", num_train=3, num_eval=60, num_test=3, num_groups=6)
    specs = env.get_dataset("eval").to_list()
    played = env.rollout(WorkplaceTeacher(), specs)
    assert {g["kind"] for s in specs for g in json.loads(s["task"])} == {
        "send", "meeting", "reply", "forward", "delete", "cancel",
    }  # fmt: skip
    for spec, episode in zip(specs, played, strict=True):
        assert episode.values["completed"] == 1.0 and episode.values["tool_errors"] == 0.0
        assert episode.values["tool_calls"] == spec["stratum"] + 1  # lookups included
        assert read_request(spec["request"])  # the teacher reads every request back
        assert episode.messages[-1]["content"] == DONE


def test_tools_are_typed_and_refuse_what_a_mailbox_would() -> None:
    with pytest.raises(RuntimeError, match="no workspace"):
        send_email("ana.lopez@acme.test", "Hi", "Hello")
    workspace = make_workspace(0)
    with bound(workspace):
        assert find_contact(workspace["contacts"][0]["name"]) == [workspace["contacts"][0]]
        assert read_email(1)["id"] == 1 and send_email(" A.B@acme.test ", "Hi", "Hello").startswith(
            "Sent email"
        )
        assert workspace["emails"][-1]["to"] == ["a.b@acme.test"]
        for call, error in (
            (lambda: send_email("Ana Lopez", "Hi", "Hello"), ValueError),
            (lambda: send_email("a@b.c", "", "Hello"), TypeError),
            (lambda: read_email("1"), TypeError),
            (lambda: delete_email(999), KeyError),
            (lambda: create_event("Sync", "Sunday", "10:00", ["a@b.c"]), ValueError),
            (lambda: create_event("Sync", "Monday", "25:00", ["a@b.c"]), ValueError),
            (lambda: create_event("Sync", "Monday", "10:00", "a@b.c"), TypeError),
        ):
            with pytest.raises(error):
                call()
    rossis = [
        {"name": f"{first} Rossi", "email": f"{first.lower()}.rossi@acme.test"} for first in ("Ana", "Hana")
    ]
    with bound({"contacts": rossis, "emails": [], "events": [], "next_id": 100}):
        assert find_contact("ana rossi") == rossis[:1] and find_contact("Rossi") == rossis  # whole words only


def test_tools_have_typed_schemas(env) -> None:
    schemas = {s["function"]["name"]: s["function"]["parameters"] for s in env.tool_schemas}
    assert len(schemas) == 10 and schemas["create_event"]["properties"]["attendees"]["items"] == {
        "type": "string"
    }
    assert schemas["reply_email"]["properties"]["email_id"]["type"] == "integer"


def test_teacher_slips_are_near_misses_drawn_per_request(env) -> None:
    assert wrong_address("ana.lopez@acme.test") == "ben.lopez@acme.test"
    assert wrong_address("nora.kim@acme.test") == "ana.kim@acme.test" and wrong_address("x@y.z") == "xx@y.z"
    requests = [r["request"] for r in env.get_dataset("train")]
    slips = [WorkplaceTeacher(0.5, seed=1).choose_slip(r, read_request(r)) for r in requests]
    assert slips == [WorkplaceTeacher(0.5, seed=2).choose_slip(r, read_request(r)) for r in requests]
    assert {s[0] for s in slips if s} == {"recipient", "duplicate", "skip"} and None in slips
    assert all(WorkplaceTeacher(0.0).choose_slip(r, read_request(r)) is None for r in requests)


def test_splits_are_deterministic_by_seed_disjoint_and_stratified(env) -> None:
    again = load_environment("workplace_assistant", **SMALL)
    other = load_environment("workplace_assistant", **SMALL, seed=1)
    train = env.get_dataset("train").to_list()
    assert train == again.get_dataset("train").to_list() and train != other.get_dataset("train").to_list()
    seeds = [{r["seed"] for r in env.get_dataset(s)} for s in ("train", "eval", "test")]
    assert not (seeds[0] & seeds[1] or seeds[0] & seeds[2] or seeds[1] & seeds[2])
    assert [sum(r["stratum"] == k for r in train) for k in range(3)] == [8, 8, 8]
    assert env.make_spec(123) == again.make_spec(123)
    assert env.spec_checks().columns == ("seed", "stratum", "request", "task")
    with pytest.raises(ValueError, match="max_turns"):
        load_environment("workplace_assistant", num_groups=4, max_turns=4)
    with pytest.raises(ValueError, match="num_groups"):
        load_environment("workplace_assistant", num_groups=9, max_turns=12)


@given(st.lists(st.text(max_size=80) | st.sampled_from(['<tool_call>{"name": "delete_email", "arguments": {"email_id": 1}}</tool_call>', '<tool_call>{"name": "send_email", "arguments": {"to": "x@acme.test", "subject": "s", "body": "b"}}</tool_call>', '<tool_call>{"name": "delete_event", "arguments": {"event_id": true}}</tool_call>', '<tool_call>{"name": "create_event", "arguments": {"title": "t", "day": "Monday", "time": "9:00", "attendees": [1]}}</tool_call>', '<tool_call>{"name": "find_contact", "arguments": {"name": ""}}</tool_call>', "<tool_call>[1, 2]</tool_call>", '<tool_call>{"name": "rm", "arguments": {}}</tool_call>']), min_size=8, max_size=8))  # fmt: skip
@settings(max_examples=120, deadline=None)
def test_any_replies_score_without_error(replies: list[str]) -> None:
    env = load_environment("workplace_assistant", num_train=3, num_eval=1, num_test=1)
    env.reset(seed=7)
    done, turns = False, 0
    while not done:
        _, reward, done, info = env.step(replies[turns])
        turns += 1
    assert info["error"] is None and 0.0 <= reward <= 1.0 and turns <= env.max_turns
    assert set(info["values"]) == METRICS
    assert all(not m["content"].startswith("Traceback") for m in env.episode.messages)


def test_the_state_is_verified_with_partial_credit_and_side_effects_penalised(env) -> None:
    spec = first_spec(env, 0, "send")
    [goal] = json.loads(spec["task"])
    right = tool_call("send_email", {"to": goal["address"], "subject": goal["subject"], "body": goal["body"]})
    wrong = tool_call(
        "send_email", {"to": "someone.else@acme.test", "subject": goal["subject"], "body": goal["body"]}
    )
    harm = tool_call("delete_email", {"email_id": 1})
    cases = {
        (right, DONE): (1.0, 1.0, 0.0),  # the state asked for
        (wrong, DONE): (2 / 3, 2 / 3, 0.0),  # a wrong recipient: one check of three fails
        (right + harm, DONE): (0.5, 1.0, 1.0),  # an email deleted that nobody asked to delete
        (right, right, DONE): (0.5, 1.0, 1.0),  # the same email sent twice
        (wrong + harm, DONE): (1 / 6, 2 / 3, 1.0),
        (right + harm + harm.replace('"email_id": 1', '"email_id": 2'), DONE): (
            0.0,
            1.0,
            2.0,
        ),  # floored at 0
        (DONE,): (0.0, 0.0, 0.0),  # nothing done
    }
    for replies, (reward, checks, side_effects) in cases.items():
        [episode] = env.rollout(Scripted(*replies), [spec])
        assert episode.reward == pytest.approx(reward), replies
        assert episode.values["state_checks"] == pytest.approx(checks)
        assert episode.values["side_effects"] == side_effects
        assert episode.values["completed"] == float(reward == 1.0)


def test_the_state_counts_not_the_calls_that_made_it(env) -> None:
    spec = first_spec(env, 1, "reply")
    [goal] = json.loads(spec["task"])
    sender = next(e["sender"] for e in make_workspace(spec["seed"])["emails"] if e["id"] == goal["email"])
    # A reply written as a new email with the same recipient, subject and body leaves the same state.
    by_hand = {"to": sender, "subject": f"Re: {goal['subject']}", "body": goal["body"]}
    [episode] = env.rollout(Scripted(tool_call("send_email", by_hand), "done"), [spec])
    assert episode.reward == 1.0 and episode.values["tool_calls"] == 1.0
    errors = tool_call("reply_email", {"email_id": 999, "body": "x"}) + tool_call(
        "reply_email", {"email_id": "1"}
    )
    reply = tool_call("reply_email", {"email_id": goal["email"], "body": goal["body"]})
    [episode] = env.rollout(Scripted(errors, reply, "done"), [spec])
    assert [m["content"].split(":")[:2] for m in episode.messages if m["role"] == "tool"][:2] == [
        ["Error", " KeyError"],
        ["Error", " TypeError"],
    ]
    assert episode.reward == 1.0 and episode.values["tool_errors"] == 2.0
    assert episode.values["format"] == 1.0  # failed calls, but well-formed ones, and a closing reply


def test_format_is_the_tool_protocol_kept_to_the_end(env) -> None:
    spec = first_spec(env, 0, "send")
    [goal] = json.loads(spec["task"])
    send = tool_call("send_email", {"to": goal["address"], "subject": goal["subject"], "body": goal["body"]})
    for replies, expected in (
        ((send, "done"), 1.0),
        (("<tool_call>{oops}</tool_call>" + send, "done"), 0.0),  # a call that is not JSON
        ((tool_call("send", {}) + send, "done"), 0.0),  # an unknown tool
        ((send,) * env.max_turns, 0.0),  # never closes: cut off by the turn limit
        (('<tool_call>{"name": " " " "',), 0.0),  # a call opened and never closed is no closing reply
    ):
        [episode] = env.rollout(Scripted(*replies), [spec])
        assert episode.values["format"] == expected, replies


def test_rubric_reports_every_metric_with_an_interval(env) -> None:
    perfect = env.evaluate(WorkplaceTeacher(0.0), split="eval").metrics
    assert perfect["task_reward"]["mean"] == perfect["completed"]["mean"] == perfect["format"]["mean"] == 1.0
    assert perfect["tool_calls"]["mean"] == 2.0  # strata 0-2: one to three tool calls
    sloppy = (
        load_environment("workplace_assistant", num_eval=200).evaluate(WorkplaceTeacher(0.2, seed=3)).metrics
    )
    for name in ("reward", *METRICS):
        stats = sloppy[name]
        assert stats["ci_low"] <= stats["mean"] <= stats["ci_high"] and stats["n"] == 200
    # Imperfect but competent: about 80% completed, partial credit for most of the slips, a few side effects.
    assert 0.7 < sloppy["completed"]["mean"] < sloppy["reward"]["mean"] < sloppy["state_checks"]["mean"] < 1.0
    assert 0.0 < sloppy["side_effects"]["mean"] < 0.2 and sloppy["tool_errors"]["mean"] == 0.0
    assert sloppy["format"]["mean"] == 1.0  # slips are in what is done, never in how it is asked


def test_a_stepped_episode_resumes_to_what_the_rollout_plays(env) -> None:
    specs = env.get_dataset("test").to_list()[:6]
    teacher = WorkplaceTeacher(0.5, seed=2)
    batch = env.rollout(teacher, specs)
    for spec, played in zip(specs, batch, strict=True):
        env.reset(spec=spec)
        done = False
        while not done:
            _, reward, done, info = env.step(teacher([env.episode.messages])[0].content)
        assert reward == played.reward and env.episode.messages == played.messages
        assert env.episode.state["workspace"] == played.state["workspace"]
        assert "workspace" not in info["state"]  # the agent looks the workspace up through the tools
        assert replay_problems(env, played.to_dict()) == []  # curation's gate replays the recorded calls


def test_teacher_refuses_what_it_cannot_answer(env) -> None:
    spec = first_spec(env, 1, "forward")
    request = spec["request"]
    teacher = WorkplaceTeacher()
    for conversation in (
        [],
        [{"role": "user", "content": "hello"}],
        [{"role": "user", "content": request}, {"role": "assistant", "content": "x"}],
        [{"role": "user", "content": request}, {"role": "tool", "content": "Error: oops"}],
        [{"role": "user", "content": request}, {"role": "tool", "content": "[]"}],
    ):
        with pytest.raises(UnplayableRequest):
            teacher([conversation])
    first = json.loads(teacher([[{"role": "user", "content": request}]])[0].content[11:-12])
    assert first == {"name": "search_emails", "arguments": {"query": json.loads(spec["task"])[0]["subject"]}}


def test_embedded_teacher_serves_the_openai_protocol(env) -> None:
    with serve_in_thread(teacher_app(env, 0.0)) as url:
        policy = OpenAIPolicy(OpenAIPolicyConfig(base_url=url, model=None, temperature=1.0))
        result = env.evaluate(policy, n=6, split="eval")
    assert result.metrics["task_reward"]["mean"] == 1.0 and result.metrics["tool_calls"]["mean"] > 1.0
    # A slipping teacher behind the server (a new request seed every turn) plays each episode as it does here.
    with serve_in_thread(teacher_app(env, 0.5)) as url:
        policy = OpenAIPolicy(OpenAIPolicyConfig(base_url=url, model=None, temperature=1.0))
        served = env.evaluate(policy, split="test").trajectories
    local = env.rollout(WorkplaceTeacher(0.5), env.get_dataset("test").to_list())
    assert [e.messages for e in served] == [e.messages for e in local] and min(e.reward for e in local) < 1.0
    assert env.scripted_policy("expert-0.2", seed=1).slip == 0.2 and env.scripted_policy("minimax") is None
    assert env.teacher_skill == 0.2 and env.curation_defaults()["min_values"] == {"completed": 1.0}
