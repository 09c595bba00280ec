"""Tools over MCP, both ways, with real servers: a tool env whose tools a FastMCP server lists and runs (a
subprocess over stdio, `wander env mcp` over streamable HTTP on loopback), and an env's own tools served for it
per episode (`tools_over: mcp`), which must play and score exactly as in process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import time

import pytest
from datasets import Dataset

from wander import Rubric, ToolEnv, XMLParser, load_environment
from wander.core.mcp_client import McpClient, McpServer
from wander.core.policy import Reply
from wander.training.episode_data import SPEC_KEY, dump_spec
from wander.training.tools import score_sessions, session_class

SERVER = textwrap.dedent(
    '''
    import os, sys, time
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("scratch")
    if "--no-tools" not in sys.argv:

        @server.tool()
        def add(a: int, b: int) -> str:
            """Add two integers."""
            return str(a + b)

        @server.tool()
        def fail(reason: str) -> str:
            """Always fails."""
            raise RuntimeError(reason)

        @server.tool()
        def slow() -> str:
            """Answers after 30 seconds."""
            time.sleep(30)
            return "late"

        @server.tool()
        def die() -> str:
            """Kills this server."""
            os._exit(1)

    server.run("stdio")
    '''
)


@pytest.fixture(scope="module")
def server_script(tmp_path_factory):
    path = tmp_path_factory.mktemp("mcp") / "server.py"
    path.write_text(SERVER)
    return path


def sum_env(server: McpServer, session: str = "shared") -> ToolEnv:
    parser = XMLParser(("answer",), answer_field="answer")

    def correct(completion, answer, parser):
        return float(parser.parse_answer(completion) == answer)

    rows = [{"prompt": f"{a} + {b}?", "answer": str(a + b), "stratum": 0} for a in range(2) for b in range(2)]
    return ToolEnv(
        mcp=server,
        mcp_session=session,
        dataset={"train": Dataset.from_list(rows)},
        rubric=Rubric([correct], [1.0], parser=parser),
        parser=parser,
        max_turns=3,
    )


def call(name: str, **arguments) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def test_a_stdio_servers_tools_are_shown_with_its_schemas_and_their_errors_and_timeouts_are_tool_messages(
    server_script,
):
    env = sum_env(McpServer(command=[sys.executable, str(server_script)], call_timeout_s=2))
    try:
        add = next(s for s in env.tool_schemas if s["function"]["name"] == "add")
        assert add == {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two integers.",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"],
                },
            },
        }
        assert json.dumps(add) in env.system_prompt  # as a local tool's schema is shown
        episode = env.start(env.get_dataset("train")[3])
        env.advance(episode, Reply(call("add", a=1, b=1) + call("fail", reason="no disk") + call("nope")))
        answers = [m["content"] for m in episode.messages[-3:]]
        assert answers[0] == "2"
        assert answers[1].startswith("Error: McpToolError: ") and "no disk" in answers[1]
        assert answers[2].startswith(
            "Error: KeyError: \"unknown tool 'nope'; available: ['add', 'die', 'fail'"
        )
        assert episode.state["tool_errors"] == 2 and episode.state["tool_calls"] == 3
        started = time.monotonic()
        env.advance(episode, Reply(call("slow")))
        assert episode.messages[-1]["content"] == "Error: McpToolError: no answer in 2 s"
        assert time.monotonic() - started < 15 and not episode.error
        env.advance(episode, Reply("<answer>2</answer>"))
        env.score([episode])
        assert episode.done and episode.reward == 1.0
    finally:
        env.close()


def test_a_server_killed_mid_episode_ends_that_episode_with_an_error_and_the_batch_goes_on(server_script):
    env = sum_env(McpServer(command=[sys.executable, str(server_script)]), session="episode")

    def policy(conversations):
        replies = []
        for messages in conversations:
            if messages[-1]["role"] == "tool":
                replies.append(f"<answer>{messages[-1]['content']}</answer>")
            elif "1 + 1" in messages[-1]["content"]:
                replies.append(call("die"))
            else:
                a, b = messages[-1]["content"].rstrip("?").split(" + ")
                replies.append(call("add", a=int(a), b=int(b)))
        return replies

    try:
        episodes = env.rollout(policy, env.get_dataset("train").to_list())
    finally:
        env.close()
    killed = episodes[3]
    assert killed.error.startswith("env_response: McpServerGone: the MCP server ")
    assert killed.done and killed.reward == 0.0
    assert [e.reward for e in episodes[:3]] == [1.0, 1.0, 1.0] and not any(e.error for e in episodes[:3])


def test_a_server_that_lists_no_tools_or_does_not_answer_is_refused_before_any_episode(server_script):
    with pytest.raises(ValueError, match="lists no tools; a tool env needs at least one"):
        sum_env(McpServer(command=[sys.executable, str(server_script), "--no-tools"]))
    with pytest.raises(ValueError, match="did not start or answer its tool list"):
        sum_env(McpServer(url=f"http://127.0.0.1:{free_port()}/mcp", call_timeout_s=2))
    with pytest.raises(ValueError, match="exactly one of them"):
        McpServer()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_wander_env_mcp_serves_calculators_tools_over_streamable_http(tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "wander.cli", "env", "mcp", "calculator", "--transport", "http"]
    server = subprocess.Popen([*command, "--port", str(port)], stderr=subprocess.PIPE, text=True)
    try:
        assert "calculator's tools over MCP at http://127.0.0.1:" in server.stderr.readline()
        client = None
        for _ in range(100):  # the banner comes before uvicorn listens
            try:
                client = McpClient(McpServer(url=f"http://127.0.0.1:{port}/mcp", call_timeout_s=10))
                client.tools  # noqa: B018
                break
            except Exception:  # noqa: BLE001 - not listening yet
                time.sleep(0.2)
        local = load_environment("calculator")
        assert [t.name for t in client.tools] == list(local.tools)
        assert client.call("multiply", {"a": 6, "b": 7}) == "42"
        assert client.call("divide", {"a": 1, "b": 0}).startswith(
            "Error: ZeroDivisionError"
        )  # the env's text
        client.close()
    finally:
        server.terminate()
        server.wait(10)


def teacher_episodes(env: ToolEnv, specs: list[dict]) -> list:
    try:
        return env.rollout(env.teacher_policy(0.3, 0), specs)
    finally:
        env.close()


def test_workplace_assistant_plays_and_scores_the_same_with_its_tools_over_mcp_episode_by_episode():
    sizes = {"num_train": 8, "num_eval": 6, "num_test": 6}
    local = load_environment("workplace_assistant", **sizes)
    specs = local.get_dataset("eval").to_list()
    played = teacher_episodes(local, specs)
    served = teacher_episodes(load_environment("workplace_assistant", tools_over="mcp", **sizes), specs)
    rewards = {e.reward for e in played}
    assert (
        1.0 in rewards and min(rewards) < 1.0
    )  # the teacher slips: a solved and an unsolved request compared
    for a, b in zip(played, served, strict=True):
        assert b.error is None
        assert b.messages == a.messages
        assert (b.reward, b.values) == (a.reward, a.values)
        assert b.state["workspace"] == a.state["workspace"]  # the server's workspace came back


def test_workplace_assistant_over_mcp_through_trls_environment_factory_scores_as_in_process():
    # GRPO's tool path: TRL calls the session's methods; the episode's server answers them, and scoring
    # takes its state back.
    results = []
    for tools_over in ("local", "mcp"):
        env = load_environment(
            "workplace_assistant", num_train=8, num_eval=6, num_test=6, tools_over=tools_over
        )
        spec = next(s for s in env.get_dataset("eval").to_list() if s["stratum"] == 1)
        session = session_class(env)(env)
        session.reset(**{SPEC_KEY: dump_spec(spec)})
        goal = json.loads(spec["task"])[0]
        found = session.search_emails(query="zzz-no-such-email")
        wrong = session.read_email(email_id=99999)
        results.append(
            (found, wrong, score_sessions(env, [[{"role": "assistant", "content": "done"}]], [session]))
        )
        results[-1] += (session._episode.state["workspace"], goal)
        env.close()
    assert results[0] == results[1]
    assert results[0][1].startswith("Error:")  # a failed call, counted by the server and taken back
