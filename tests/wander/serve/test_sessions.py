"""Sessions per client on `wander env serve`: a real server on loopback, clients on two or three source addresses
(Linux routes all of 127/8 to lo). One client cannot take every slot, WebSocket and HTTP MCP sessions count against
one cap, an idle session of either kind is closed after the TTL, and a refused create says which limit and why."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from wander import load_environment
from wander.serve.server import serve_env_in_thread

from .conftest import SETTINGS

A, B, C = "127.0.0.1", "127.0.0.2", "127.0.0.3"  # three clients
JSONRPC_SERVER_ERROR = -32000


@contextlib.contextmanager
def server(**options) -> Iterator[str]:
    """A tic-tac-toe server with `options` (create_env_app's) on a loopback port; its base URL."""
    with serve_env_in_thread(load_environment("tictactoe", **SETTINGS), **options) as url:
        yield url


def rpc(url: str, source: str, method: str, headers: dict | None = None, **params) -> dict:
    """One JSON-RPC call to the server's HTTP `/mcp`, sent from `source`."""
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=30, headers=headers) as client:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return client.post(url + "/mcp", json=body).json()


def mcp_session(url: str, source: str, headers: dict | None = None) -> tuple[str | None, dict]:
    """`openenv/session/create` from `source`: the new session's id (None when refused) and the answer."""
    answer = rpc(url, source, "openenv/session/create", headers)
    return answer.get("result", {}).get("session_id"), answer


def ws_session(url: str, source: str) -> tuple[ClientConnection | None, dict]:
    """A WebSocket session from `source`, reset once: the open connection (None when refused) and the first reply."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=30, source_address=(source, 0))
    ws = connect(url.replace("http://", "ws://") + "/ws", sock=sock, open_timeout=30)
    # A refused connection gets its error frame and is closed at once, maybe before the reset goes out: the frame
    # still waits to be read.
    with contextlib.suppress(ConnectionClosed):
        ws.send(json.dumps({"type": "reset", "data": {"seed": 1}}))
    reply = json.loads(ws.recv(timeout=30))
    if reply["type"] == "observation":
        return ws, reply
    ws.close()
    return None, reply


def refusal(answer: dict) -> str:
    """The message of a refused create, in either protocol's error form; asserts it is OpenEnv's capacity error."""
    if "jsonrpc" in answer:
        assert answer["error"]["code"] == JSONRPC_SERVER_ERROR, answer
        return answer["error"]["message"]
    assert answer["type"] == "error" and answer["data"]["code"] == "CAPACITY_REACHED", answer
    return answer["data"]["message"]


def eventually(opened, within: float, every: float = 0.05):
    """Call `opened()` until it returns a session (not None); fail after `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        session, answer = opened()
        if session is not None:
            return session
        assert time.monotonic() < deadline, f"no session within {within} s: {answer}"
        time.sleep(every)


def test_one_client_fills_its_share_and_another_still_gets_a_session():
    # The attack: unauthenticated HTTP MCP creates from one address until refused, with the default share.
    with server(max_sessions=8) as url:
        assert httpx.get(url + "/wander/info").json()["max_sessions_per_client"] == 4  # half the cap
        created = [sid for sid, _ in (mcp_session(url, A) for _ in range(10)) if sid is not None]
        assert len(created) == 4
        _, refused = mcp_session(url, A)
        assert "this client (127.0.0.1) holds its share" in refusal(refused)
        # X-Forwarded-For is not believed: the peer's own address is the client.
        for i in range(3):
            _, spoofed = mcp_session(url, A, headers={"X-Forwarded-For": f"10.0.0.{i}"})
            assert "this client (127.0.0.1)" in refusal(spoofed)
        ws, reply = ws_session(url, B)  # another client: a WebSocket session that plays
        assert ws is not None, reply
        ws.send(json.dumps({"type": "step", "data": {"message": "<move>4</move>"}}))
        assert json.loads(ws.recv(timeout=30))["type"] == "observation"
        ws.close()
        assert mcp_session(url, B)[0] is not None


def test_websocket_and_mcp_sessions_count_against_one_cap_and_one_share():
    with server(max_sessions=4, max_sessions_per_client=2) as url:
        a_ws, _ = ws_session(url, A)
        a_mcp, _ = mcp_session(url, A)
        assert a_ws is not None and a_mcp is not None
        for answer in (ws_session(url, A)[1], mcp_session(url, A)[1]):  # A's share, counted over both kinds
            assert "this client (127.0.0.1) holds its share of the server's 4 sessions: 2 open" in refusal(
                answer
            )
        b_mcp, _ = mcp_session(url, B)
        b_ws, _ = ws_session(url, B)
        assert b_mcp is not None and b_ws is not None
        for answer in (mcp_session(url, C)[1], ws_session(url, C)[1]):  # the cap, counted over both kinds
            assert "the server is full: 4 of the server's 4 sessions are open" in refusal(answer)
        a_ws.close()  # a closed WebSocket frees a slot for an HTTP MCP session...
        eventually(lambda: mcp_session(url, C), within=10)
        closed = rpc(url, B, "openenv/session/close", session_id=b_mcp)
        assert closed["result"]["closed"] is True
        c_ws = eventually(
            lambda: ws_session(url, C), within=10
        )  # ...and a closed MCP session, one for a WebSocket
        assert "the server is full" in refusal(mcp_session(url, C)[1])
        for ws in (b_ws, c_ws):
            ws.close()


def test_idle_sessions_of_both_kinds_are_closed_after_the_ttl():
    ttl = 0.5
    with server(max_sessions=3, max_sessions_per_client=3, idle_ttl_s=ttl) as url:
        busy, _ = mcp_session(url, A)
        # Two rounds back to back: the second starts just after the first's sessions were closed, so a reaper that
        # wakes only every few seconds would be late in it whatever the phase of its wakes.
        for _ in range(2):
            idle_mcp, _ = mcp_session(url, A)
            idle_ws, _ = ws_session(url, B)
            assert idle_mcp is not None and idle_ws is not None
            start, freed = time.monotonic(), []
            while len(freed) < 2:  # the server is full until both idle sessions are closed
                rpc(url, A, "tools/list", session_id=busy)  # any call on a session keeps it alive
                session, answer = mcp_session(url, C)
                if session is not None:
                    freed.append(session)
                else:
                    assert "the server is full" in refusal(answer)
                    time.sleep(0.05)
                assert time.monotonic() - start < ttl + 2.0, "an idle session outlived its TTL by 2 s"
            assert "Unknown session_id" in rpc(url, A, "tools/list", session_id=idle_mcp)["error"]["message"]
            idle_ws.send(json.dumps({"type": "step", "data": {"message": "<move>4</move>"}}))
            assert "closed by the server" in json.loads(idle_ws.recv(timeout=30))["data"]["message"]
            idle_ws.close()
            for session in freed:
                assert rpc(url, C, "openenv/session/close", session_id=session)["result"]["closed"] is True
        assert "Unknown session_id" not in rpc(url, A, "tools/list", session_id=busy)["error"]["message"]


def test_a_refused_create_names_its_limit_the_numbers_and_what_to_do():
    with server(max_sessions=2, max_sessions_per_client=1, idle_ttl_s=120) as url:
        assert mcp_session(url, A)[0] is not None
        share = [
            refusal(ws_session(url, A)[1]),
            refusal(mcp_session(url, A)[1]),
        ]  # a frame and a JSON-RPC error
        for message in share:
            assert "this client (127.0.0.1) holds its share of the server's 2 sessions: 1 open" in message
            assert "at most 1 per client (a client is an IP address" in message
            assert "close one of its sessions" in message and "a session idle for 120 s is closed" in message
        assert mcp_session(url, B)[0] is not None
        full = [refusal(ws_session(url, C)[1]), refusal(mcp_session(url, C)[1])]
        for message in full:
            assert "the server is full: 2 of the server's 2 sessions are open" in message
            assert "try again later, or wait: a session idle for 120 s is closed" in message


def test_the_web_interfaces_server_holds_the_same_limits():
    with server(
        max_sessions=2, max_sessions_per_client=1, web=True
    ) as url:  # OpenEnv's Gradio app, built apart
        assert mcp_session(url, A)[0] is not None
        assert "this client (127.0.0.1) holds its share" in refusal(ws_session(url, A)[1])
        ws, reply = ws_session(url, B)
        assert ws is not None, reply
        ws.close()


@pytest.mark.parametrize("per_client", [0, 3])
def test_a_share_outside_one_to_the_cap_is_refused(per_client):
    with pytest.raises(
        ValueError, match=f"--max-sessions-per-client {per_client} must be 1 to --max-sessions"
    ):
        with server(max_sessions=2, max_sessions_per_client=per_client):
            pass
