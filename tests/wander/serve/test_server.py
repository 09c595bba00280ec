"""`wander env serve`: OpenEnv's own client plays tic-tac-toe; sessions are isolated, capped, reaped; bad input is 4xx."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient

from envs.tictactoe import MinimaxPlayer, RandomPlayer
from wander import load_environment
from wander.core.replay import replay_problems
from wander.serve.server import serve_env_in_thread

from .conftest import SETTINGS


def record(spec: dict, messages: list, final: dict) -> dict:
    """An Episode.to_dict()-shaped record of a game played over the wire, for wander.core.replay."""
    obs = final["observation"] if "observation" in final else final
    return {
        "spec": spec,
        "messages": messages,
        "values": obs["values"],
        "reward": final["reward"],
        "state": obs["state"],
    }


async def play(url: str, seed: int, player) -> tuple[dict, list, dict]:
    """One whole game through OpenEnv's async client: reset(seed), then the player's move each turn."""
    # Generous timeouts: 200 sessions connect at once, on 2 cores that may be busy with other work.
    async with GenericEnvClient(base_url=url, connect_timeout_s=120, message_timeout_s=120) as client:
        result = await client.reset(seed=seed)
        messages = list(result.observation["messages"])
        while not result.done:
            reply = player([result.observation["prompt"]])[0].content
            result = await client.step({"message": reply})
            messages += [{"role": "assistant", "content": reply}, *result.observation["messages"]]
        state = await client.state()
    final = {"observation": result.observation, "reward": result.reward}
    return state["spec"], messages, final


def test_openenv_client_plays_whole_games_like_the_local_env(served, local_env):
    for seed in range(6):
        spec, messages, final = asyncio.run(play(served, seed, MinimaxPlayer(0.3, seed=seed)))
        assert spec == local_env.make_spec(seed)
        local = local_env.rollout(MinimaxPlayer(0.3, seed=seed), [spec])[0]
        assert messages == local.messages
        assert final["reward"] == local.reward and final["observation"]["values"] == local.values
        assert replay_problems(local_env, record(spec, messages, final)) == []


def test_the_sync_client_and_a_spec_or_task_reset(served, local_env):
    with GenericEnvClient(base_url=served).sync() as client:
        spec = dict(local_env.get_dataset("eval")[3])
        by_task = client.reset(split="eval", index=3)
        by_spec = client.reset(spec=spec)
        assert by_task.observation["messages"] == by_spec.observation["messages"]
        assert by_task.observation["messages"] == local_env.start(spec).messages


def test_200_concurrent_sessions_finish_without_error_or_cross_talk(served, local_env):
    async def main():
        return await asyncio.gather(*(play(served, 1000 + i, RandomPlayer(seed=i)) for i in range(200)))

    games = asyncio.run(main())
    assert_random_games_replay_locally(local_env, games, first_seed=1000)


def assert_random_games_replay_locally(local_env, games: list, first_seed: int) -> None:
    """Game i (seed first_seed + i, `RandomPlayer(seed=i)`) played remotely is the same player's game alone, locally."""
    assert len(games) == 200
    for i, (spec, messages, final) in enumerate(games):
        assert spec["seed"] == first_seed + i
        local = local_env.rollout(RandomPlayer(seed=i), [spec])[0]
        assert messages == local.messages and final["reward"] == local.reward
        assert replay_problems(local_env, record(spec, messages, final)) == []


def test_a_full_server_refuses_clearly_and_frees_slots_on_close():
    env = load_environment("tictactoe", **SETTINGS)
    # One client (this process) fills the cap: it may hold every session.
    with serve_env_in_thread(env, max_sessions=2, max_sessions_per_client=2) as url:

        async def main():
            first, second = GenericEnvClient(base_url=url), GenericEnvClient(base_url=url)
            await first.reset(seed=1)
            await second.reset(seed=2)
            third = GenericEnvClient(base_url=url)
            with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
                await third.reset(seed=3)
            await third.close()
            await first.close()
            await asyncio.sleep(0.2)
            fourth = GenericEnvClient(base_url=url)
            assert not (await fourth.reset(seed=3)).done
            await fourth.close()
            await second.close()

        asyncio.run(main())


@pytest.mark.slow
def test_idle_sessions_are_reaped_after_their_ttl():
    # The reaper wakes every min(ttl / 4, 5 s) (wander.serve.sessions): a 1 s TTL is reaped within about 1.25 s.
    # A cap of one: the default per-client share is that one session.
    with serve_env_in_thread(
        load_environment("tictactoe", **SETTINGS), max_sessions=1, idle_ttl_s=1.0
    ) as url:

        async def main():
            idle = GenericEnvClient(base_url=url)
            await idle.reset(seed=1)
            deadline = time.monotonic() + 15
            while True:  # the only slot frees up once the idle session is reaped
                fresh = GenericEnvClient(base_url=url)
                try:
                    await fresh.reset(seed=2)
                    break
                except RuntimeError as exc:
                    assert "CAPACITY_REACHED" in str(exc)
                    assert time.monotonic() < deadline, "idle session never reaped"
                    await asyncio.sleep(0.5)
                finally:
                    await fresh.close()
            with pytest.raises(RuntimeError, match="closed by the server"):
                await idle.step({"message": "<move>4</move>"})
            await idle.close()

        asyncio.run(main())


def test_bad_http_requests_are_4xx_with_a_reason(served):
    def post(path, **kwargs):
        return httpx.post(served + path, timeout=10, **kwargs)

    assert post("/step", json={"action": {"message": "<move>4</move>"}}).status_code == 409  # stateless HTTP
    assert "WebSocket" in post("/step", json={"action": {"message": "x"}}).json()["detail"]
    assert post("/step", json={"action": {"message": "x", "extra": 1}}).status_code == 422
    assert post("/step", json={"action": {"msg": "x"}}).status_code == 422
    assert post("/step", content=b"{not json").status_code == 422
    assert post("/reset", json={"seed": -1}).status_code == 422
    assert post("/reset", json={"seed": 1, "colour": "red"}).status_code == 422
    assert post("/reset", json={"split": "nope", "index": 0}).status_code == 422
    assert post("/reset", json={"split": "eval", "index": 10**6}).status_code == 422
    assert post("/reset", json={"spec": {"seed": "x"}}).status_code == 422
    assert post("/reset", content=b"x" * (2 << 20)).status_code == 413
    assert post("/tictactoe/task", json={"split": "eval", "index": 99}).status_code == 400
    assert post("/tictactoe/tasks", json={"split": "nope"}).status_code == 422
    ok = post("/reset", json={"seed": 5})
    assert ok.status_code == 200 and ok.json()["observation"]["messages"]


def test_bad_websocket_messages_get_error_frames_and_the_session_goes_on(served):
    from websockets.sync.client import connect

    with connect(served.replace("http", "ws") + "/ws") as ws:

        def send(text):
            ws.send(text)
            import json

            return json.loads(ws.recv())

        assert send("{oops")["data"]["code"] == "INVALID_JSON"
        assert send("[1, 2]")["data"]["code"] == "INVALID_JSON"  # JSON, but not a message object
        assert send('{"type": "dance"}')["data"]["code"] == "UNKNOWN_TYPE"
        assert (
            "no episode" in send('{"type": "step", "data": {"message": "<move>4</move>"}}')["data"]["message"]
        )
        assert send('{"type": "step", "data": {"message": 4}}')["type"] == "error"
        assert send('{"type": "reset", "data": {"seed": "nine"}}')["type"] == "error"
        obs = send('{"type": "reset", "data": {"seed": 7}}')
        assert obs["type"] == "observation" and not obs["data"]["done"]
        for _ in range(8):  # invalid moves until the turn limit ends the game
            last = send('{"type": "step", "data": {"message": "no move"}}')
        assert last["data"]["done"] and last["data"]["observation"]["values"]["invalid_moves"] == 8
        assert "over" in send('{"type": "step", "data": {"message": "<move>1</move>"}}')["data"]["message"]
        assert send('{"type": "reset", "data": {"seed": 8}}')["type"] == "observation"


def test_threaded_sessions_play_the_same_games(local_env):
    with serve_env_in_thread(load_environment("tictactoe", **SETTINGS), threaded=True) as url:
        spec, messages, final = asyncio.run(play(url, 3, MinimaxPlayer(0.3, seed=3)))
    assert messages == local_env.rollout(MinimaxPlayer(0.3, seed=3), [spec])[0].messages


def test_an_unknown_session_or_an_oversized_frame_is_refused_and_the_server_goes_on(served):
    import json

    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    ws_url = served.replace("http", "ws") + "/ws"
    with connect(ws_url + "?session_id=nope") as ws:
        reply = json.loads(ws.recv(timeout=10))
        assert reply["type"] == "error" and "Unknown session_id: nope" in reply["data"]["message"]
    with connect(ws_url, max_size=None) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            ws.send(json.dumps({"type": "step", "data": {"message": "x" * (2 << 20)}}))
            ws.recv(timeout=10)
        # The server closes with 1009 (message too big); when it does so before the client has written the whole
        # frame, the client's send meets a reset socket and never reads the close frame (a race on busy cores).
        assert closed.value.rcvd is None or closed.value.rcvd.code == 1009
    with connect(ws_url) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
