"""Fuzzing `wander ui` as a process of its own on loopback: thousands of malformed and random requests (forms with and
without the token, from its own origin and others, odd fields, sizes around and over the body limit, odd paths,
queries, methods, Hosts and headers, raw garbage) get no 5xx, leave its memory bounded, and a normal client can still
play a game afterwards. The figures go to docs/experiments/hardening.md."""

from __future__ import annotations

import re
from urllib.parse import quote, urlencode

import httpx
import pytest

from wander.ui.app import MAX_BODY

from ..fuzz_http import Fuzzer, cli_server, memory_mb, random_json, server_log

FUZZ_REQUESTS = 10_000
FUZZ_TIME_LIMIT_S = 300.0
HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
POLICIES = [
    "minimax",
    "random",
    "teacher",
    "expert-0.25",
    "expert-x",
    "minimax-2",
    "champion",
    "base",
    "data/models/base",
    "data",
    "../../etc",
    "/etc/passwd",
    "org/name",
    "http://203.0.113.7/v1",
    "http://[::1",
    "http://127.0.0.1:99999/v1",
    "https://user:pw@evil.example/v1",
    "file:///etc/passwd",
    "\x00",
    "",
    " ",
    "é" * 300,
    "a/" * 2000,
    HOSTILE,
]
ENVS = [
    "",
    "tictactoe",
    "reverse_text",
    "calculator",
    "os",
    "openenv:http://127.0.0.1:9",
    "envs.tictactoe",
    HOSTILE,
]
TEXTS = ["", "4", "-1", "9" * 5000, "<move>4</move>", "nine", HOSTILE, "\x00\x01", "é" * 1000, "x" * 30_000]


class UIFuzzer(Fuzzer):
    """The shared fuzzer's raw requests (sent with a Host that is not the UI's: each must be refused) and, mostly,
    requests the UI's own pages could send, each with one thing wrong or random."""

    def __init__(self, port: int, token: str, games: list[str], seed: int = 0):
        routes = [("GET", "/play"), ("POST", "/play/new"), ("GET", "/episodes"), ("GET", "/curves")]
        super().__init__(port, routes, {"/play/new": [{"policy": "minimax"}]}, MAX_BODY, seed)
        self.token, self.games = token, games
        self.host = f"127.0.0.1:{port}"

    def request(self) -> bytes:
        """One random request: 15% the shared fuzzer's, the rest the UI's forms and pages, bent."""
        kinds = [super().request, self._form, self._move, self._page, self._host, self._size]
        return self.rng.choices(kinds, [15, 35, 20, 20, 5, 5])[0]()

    def _raw(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes = b"") -> bytes:
        head = f"{method} {path} HTTP/1.1\r\nConnection: close\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers
        )
        return head.encode("utf-8", "surrogateescape") + b"\r\n" + body

    def _headers(self, body: bytes, kind: str = "application/x-www-form-urlencoded") -> list[tuple[str, str]]:
        origin = self.rng.choices(
            [f"http://{self.host}", "http://evil.example", "null", None, f"http://{self.host}/x"],
            [80, 5, 3, 10, 2],
        )[0]
        headers = [("Host", self.host), ("Content-Type", kind), ("Content-Length", str(len(body)))]
        return headers + ([("Origin", origin)] if origin else [])

    def _token(self) -> list[tuple[str, str]]:
        roll = self.rng.random()
        if roll < 0.8:
            return [("csrf", self.token)]
        return [] if roll < 0.9 else [("csrf", self.rng.choice(["", self.token[:-1], "x" * 5000]))]

    def _encode(self, fields: list[tuple[str, str]]) -> bytes:
        rng = self.rng
        if rng.random() < 0.1:  # broken encodings: bad escapes, invalid UTF-8, more fields than any form has
            fields = fields + [(f"k{i}", "v") for i in range(rng.choice([0, 200]))]
            return urlencode(fields).encode() + rng.choice([b"&%zz=%", b"&a=\xff\xfe", b"&&&==", b";csrf"])
        return urlencode(fields).encode()

    def _form(self) -> bytes:
        rng = self.rng
        fields = [
            ("policy", rng.choice(POLICIES)),
            ("env", rng.choice(ENVS)),
            ("side", rng.choice(["first", "second", "middle", ""])),
        ]
        fields = [f for f in fields if rng.random() < 0.9] + self._token()
        if rng.random() < 0.1:
            fields.append((rng.choice(["policy", "x", ""]), str(random_json(rng))))
        rng.shuffle(fields)
        body = self._encode(fields)
        kind = rng.choices(
            ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain"], [90, 5, 5]
        )[0]
        return self._raw("POST", "/play/new", self._headers(body, kind), body)

    def _move(self) -> bytes:
        rng = self.rng
        game = rng.choice(self.games + ["nope", "g0-00000000", "%00", "x" * 300])
        if rng.random() < 0.5:
            fields = [("move", rng.choice(TEXTS[:6] + [str(rng.randrange(-3, 12))]))]
            path = f"/play/{quote(game)}/move"
        else:
            fields = [("text", rng.choice(TEXTS)), ("who", rng.choice(["person", "policy", "", "x"]))]
            path = f"/play/{quote(game)}/turn"
        body = self._encode(fields + self._token())
        return self._raw("POST", path, self._headers(body), body)

    def _page(self) -> bytes:
        rng = self.rng
        junk = rng.choice(["", "-1", "99999999999999999999999", "x", "0", "1", "%00", "é", HOSTILE])
        cell = {"policy": rng.choice(["base", "minimax", junk]), "opponent": "random", "side": "first"}
        path = rng.choice(
            [
                "/",
                "/play",
                f"/play/{rng.choice(self.games + [junk])}",
                "/episodes",
                "/episodes/cell?" + urlencode({**cell, "flag": rng.choice(["any_invalid", "loss", junk])}),
                "/episodes/game?" + urlencode({**cell, "index": rng.choice(["0", "1", junk]), "move": junk}),
                "/episodes/game?index=&move=",
                "/curves",
                "/docs",
                "/openapi.json",
                "/play/" + "x" * rng.choice([10, 5000]),
            ]
        )
        method = rng.choices(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"], [80, 5, 5, 5, 5])[0]
        return self._raw(method, quote(path, safe="/?=&%"), [("Host", self.host)])

    def _host(self) -> bytes:
        host = self.rng.choice(
            [
                "evil.example",
                f"evil.example:{self.port}",
                f"localhost:{self.port}",
                f"[::1]:{self.port}",
                "",
                "a:b:c",
                f"127.0.0.1:{self.port}@x",
            ]
        )
        return self._raw(self.rng.choice(["GET", "POST"]), "/play", [("Host", host), ("Content-Length", "0")])

    def _size(self) -> bytes:
        size = self.rng.choice([MAX_BODY - 200, MAX_BODY + 1, 4 * MAX_BODY])
        body = urlencode([("csrf", self.token), ("policy", "minimax"), ("text", "x" * size)]).encode()[
            : size + 100
        ]
        return self._raw("POST", "/play/new", self._headers(body), body)


def _token(url: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', httpx.get(url + "/play", timeout=30).text).group(1)


def _new_game(url: str, token: str, **form: str) -> str:
    response = httpx.post(
        url + "/play/new",
        data={"csrf": token, **form},
        headers={"Origin": url},
        timeout=60,
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text[-500:]
    return response.headers["location"].rsplit("/", 1)[1]


@pytest.mark.slow
def test_the_ui_process_takes_thousands_of_hostile_requests_without_a_5xx_and_goes_on_serving(run_root):
    # The library's own command, told of the run by its options (the project's `python -m flows.ui` reads them from
    # params.yaml: tests/flows/test_ui.py).
    run = [
        "--lineage",
        "base=data/models/base",
        "--model-name",
        "wander-tictactoe",
        "--metrics-dir",
        "data/metrics",
    ]
    with cli_server(["ui", "--root", str(run_root), *run], "/play") as (url, server):
        token = _token(url)
        games = [
            _new_game(url, token, policy="minimax", side="first"),
            _new_game(url, token, policy="random", side="second"),
            _new_game(url, token, policy="teacher", env="reverse_text"),
        ]
        fuzzer = UIFuzzer(int(url.rsplit(":", 1)[1]), token, games, seed=44)
        # A warm-up first: the envs and policies the forms name are loaded once, then kept (bounded caches).
        warm = fuzzer.run(300, server.pid, FUZZ_TIME_LIMIT_S)
        report = fuzzer.run(FUZZ_REQUESTS, server.pid, FUZZ_TIME_LIMIT_S)
        rss, peak = memory_mb(server.pid)
        print(f"ui fuzz: warm-up {warm.summary()}; fuzz {report.summary()}")
        assert report.requests == FUZZ_REQUESTS, f"only {report.requests} requests in {FUZZ_TIME_LIMIT_S} s"
        for run in (warm, report):
            assert run.server_errors() == 0 and run.statuses["timeout"] == 0, (
                f"{run.summary()}\n{server_log(server)}"
            )
        for status in (200, 303, 400, 403, 404, 413):
            assert status in report.statuses, (status, report.summary())
        # The warm-up's loads (torch, the tiny model, every env) are the server's size; the fuzz adds next to nothing.
        assert rss - report.rss_before_mb < 100 and peak - report.rss_before_mb < 100, report.summary()
        assert peak < 1536, f"peak {peak:.0f} MiB: {warm.summary()}"
        # Still serving a normal client: a whole game against minimax through the forms.
        game = _new_game(url, token, policy="minimax", side="first")
        for _ in range(5):
            page = httpx.get(f"{url}/play/{game}", timeout=30).text
            if 'id="game-over"' in page:
                break
            cell = re.search(r'name="move" value="(\d+)"', page).group(1)
            move = httpx.post(
                f"{url}/play/{game}/move",
                data={"csrf": token, "move": cell},
                headers={"Origin": url},
                timeout=60,
            )
            assert move.status_code == 200, move.text[-500:]
        assert 'id="game-over"' in httpx.get(f"{url}/play/{game}", timeout=30).text
        assert httpx.get(url + "/episodes", timeout=30).status_code == 200
        assert server.poll() is None
