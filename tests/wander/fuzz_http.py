"""A seeded fuzzer for an HTTP server running in its own process on loopback, shared by every server's fuzz test.

It sends thousands of malformed and random requests over raw sockets (so nothing a client library would refuse
to send is out of reach): mutated and random JSON bodies, deep nesting, invalid JSON and bytes, bodies around and
far over the size limit (declared and chunked), odd paths, methods, headers and request lines, and plain garbage.
Each request is one connection (`Connection: close`), answered within a timeout or counted. The report has the
figures a test asserts on and docs/experiments/hardening.md records: requests, seconds, answers by status, the
server's memory (resident set before and after, and its peak) and how many connections got no answer.
"""

from __future__ import annotations

import contextlib
import json
import random
import select
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Route = tuple[str, str]  # (method, path)
JUNK = [
    None,
    True,
    False,
    0,
    -1,
    2**64,
    -(2**70),
    1.5,
    1e308,
    "",
    "x",
    "\x00",
    "é" * 50,
    [],
    {},
    [1, [2]],
    {"a": {}},
]


@dataclass
class Report:
    """What a fuzz run did and what the server did with it."""

    requests: int = 0
    seconds: float = 0.0
    statuses: Counter = field(default_factory=Counter)  # HTTP status, or "closed" (no answer) / "timeout"
    rss_before_mb: float = 0.0
    rss_after_mb: float = 0.0
    rss_peak_mb: float = 0.0

    def server_errors(self) -> int:
        """Answers with a 5xx status."""
        return sum(n for status, n in self.statuses.items() if isinstance(status, int) and status >= 500)

    def summary(self) -> str:
        """One line of figures."""
        statuses = ", ".join(f"{k}: {v}" for k, v in sorted(self.statuses.items(), key=lambda kv: str(kv[0])))
        return (
            f"{self.requests} requests in {self.seconds:.1f} s; statuses {{{statuses}}}; RSS {self.rss_before_mb:.0f}"
            f" -> {self.rss_after_mb:.0f} MiB (peak {self.rss_peak_mb:.0f} MiB)"
        )


def memory_mb(pid: int) -> tuple[float, float]:
    """A process's resident set and its peak (VmRSS, VmHWM), in MiB."""
    fields = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            fields[key] = value.split()
    return int(fields["VmRSS"][0]) / 1024, int(fields["VmHWM"][0]) / 1024


def random_json(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON value: scalars from JUNK, strings, and nested lists and objects."""
    roll = rng.random()
    if depth > 3 or roll < 0.45:
        return rng.choice(JUNK)
    if roll < 0.6:
        return "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(40)))
    if roll < 0.8:
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(5))]
    return {
        rng.choice(["model", "messages", "seed", "spec", "x", ""]): random_json(rng, depth + 1)
        for _ in range(3)
    }


def mutate(rng: random.Random, value: Any) -> Any:
    """A valid body with one part changed: a value replaced by junk, a key dropped or added, a list emptied."""
    if isinstance(value, dict) and value:
        key = rng.choice(list(value))
        out = dict(value)
        roll = rng.random()
        if roll < 0.2:
            del out[key]
        elif roll < 0.3:
            out[rng.choice(["x", "role", "n", "stream", "__proto__"])] = random_json(rng)
        elif roll < 0.6:
            out[key] = mutate(rng, value[key])
        else:
            out[key] = random_json(rng)
        return out
    if isinstance(value, list) and value:
        out = list(value)
        i = rng.randrange(len(out))
        out[i] = mutate(rng, out[i]) if rng.random() < 0.7 else random_json(rng)
        return out if rng.random() < 0.9 else []
    return random_json(rng)


def _request(method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers)
    return head.encode("utf-8", "surrogateescape") + b"\r\n" + body


def _json_request(method: str, path: str, body: bytes, kind: str = "application/json") -> bytes:
    return _request(method, path, [("Content-Type", kind), ("Content-Length", str(len(body)))], body)


class Fuzzer:
    """Seeded requests to one server: its routes (with valid bodies to mutate) and its body limit."""

    def __init__(
        self, port: int, routes: list[Route], bodies: dict[str, list[Any]], body_limit: int, seed: int = 0
    ):
        self.port, self.routes, self.bodies, self.limit = port, routes, bodies, body_limit
        self.rng = random.Random(seed)

    def request(self) -> bytes:
        """One random request, whole (a declared length always matches the bytes sent: no request hangs)."""
        rng, limit = self.rng, self.limit
        method, path = rng.choice(self.routes)
        kinds = [self._mutated, self._random_body, self._bad_json, self._deep, self._big, self._chunked_big]
        kinds += [self._odd_path, self._odd_method, self._odd_headers, self._garbage]
        weights = [30, 10, 8, 4, 2, 2, 12, 6, 12, 4]
        return rng.choices(kinds, weights)[0](method, path, limit)

    def _mutated(self, method: str, path: str, limit: int) -> bytes:
        valid = self.bodies.get(path) or [{}]
        body = mutate(self.rng, self.rng.choice(valid)) if self.rng.random() < 0.9 else self.rng.choice(valid)
        return _json_request(method if self.rng.random() < 0.9 else "POST", path, json.dumps(body).encode())

    def _random_body(self, method: str, path: str, limit: int) -> bytes:
        return _json_request(method, path, json.dumps(random_json(self.rng)).encode())

    def _bad_json(self, method: str, path: str, limit: int) -> bytes:
        rng = self.rng
        text = json.dumps(rng.choice(self.bodies.get(path) or [{"a": [1, 2]}]))
        body = rng.choice(
            [text[: rng.randrange(len(text) + 1)], text.replace('"', "'"), "{" * 30, "NaN", "\ud800"]
        )
        raw = (
            body.encode("utf-8", "surrogatepass")
            if rng.random() < 0.8
            else bytes(rng.randrange(256) for _ in range(64))
        )
        kind = rng.choice(
            ["application/json", "text/plain", "application/x-www-form-urlencoded", "multipart/x"]
        )
        return _json_request(method, path, raw, kind)

    def _deep(self, method: str, path: str, limit: int) -> bytes:
        depth = self.rng.choice([100, 1_000, 10_000, 100_000])
        body = (
            ("[" * depth + "]" * depth) if self.rng.random() < 0.5 else ('{"a":' * depth + "1" + "}" * depth)
        )
        return _json_request(method, path, body.encode())

    def _big(self, method: str, path: str, limit: int) -> bytes:
        size = self.rng.choice([limit - 64, limit + 1, 4 * limit])
        body = b'{"x": "' + b"a" * max(0, size - 10) + b'"}'
        return _json_request(method, path, body)

    def _chunked_big(self, method: str, path: str, limit: int) -> bytes:
        chunk = b"a" * 65536
        count = (2 * limit) // len(chunk)
        body = b"".join(b"%x\r\n" % len(chunk) + chunk + b"\r\n" for _ in range(count)) + b"0\r\n\r\n"
        return _request(
            method, path, [("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")], body
        )

    def _odd_path(self, method: str, path: str, limit: int) -> bytes:
        rng = self.rng
        odd = rng.choice(
            [
                path + "/" + "x" * rng.choice([10, 1_000, 20_000]),
                path + "?" + "&".join(f"k{i}={i}" for i in range(rng.choice([1, 500]))),
                "/../../etc/passwd",
                "/%2e%2e/%00/%ff%fe",
                "/" + "".join(chr(rng.randrange(0x21, 0x7F)) for _ in range(rng.randrange(1, 60))),
                path.replace("/", "//"),
                "*",
                "http://example.com" + path,
                "/" + "é" * 20,
            ]
        )
        odd = odd.replace(" ", "%20")
        return _json_request(method, odd, json.dumps(random_json(rng)).encode())

    def _odd_method(self, method: str, path: str, limit: int) -> bytes:
        odd = self.rng.choice(
            ["PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE", "CONNECT", "BREW", "G@T", "get"]
        )
        return _json_request(odd, path, b"{}")

    def _odd_headers(self, method: str, path: str, limit: int) -> bytes:
        rng = self.rng
        body = json.dumps(rng.choice(self.bodies.get(path) or [{}])).encode()
        length = ("Content-Length", str(len(body)))
        headers = rng.choice(
            [
                [length, ("Content-Type", "application/json; charset=utf-16")],
                [length, length],
                [length, ("X-" + "a" * 100, "b" * rng.choice([100, 10_000, 70_000]))],
                [length, *((f"X-{i}", "v") for i in range(rng.choice([50, 500])))],
                [length, ("Transfer-Encoding", "gzip")],
                [length, ("Content-Type", "application/json"), ("Content-Encoding", "gzip")],
                [("Content-Length", "-1")],
                [("Content-Length", "99999999999999999999")],
                [("Content-Length", "abc")],
                [length, ("Bad Header", "x")],
                [length, ("Cookie", ";" * 1000)],
                [length, ("Origin", "http://evil.example"), ("Authorization", "Bearer " + "x" * 300)],
            ]
        )
        # A length header that does not match the body would leave the server waiting for bytes: only bad ones
        # that the server must refuse outright (negative, huge, not a number) come without a body.
        sent = b"" if headers[0][1] in ("-1", "99999999999999999999", "abc") else body
        return _request(method, path, headers, sent)

    def _garbage(self, method: str, path: str, limit: int) -> bytes:
        rng = self.rng
        return rng.choice(
            [
                bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))) + b"\r\n\r\n",
                b"GET / HTTP/9.9\r\n\r\n",
                f"{method} {path}\r\n\r\n".encode(),
                f"{method} {path} HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n".encode(),
                f"{method} {path} HTTP/1.0\r\n\r\n".encode(),
            ]
        )

    def send(self, raw: bytes, timeout: float = 15.0) -> int | str:
        """Send one request on a fresh connection; its status, or "closed" / "timeout" without one.

        The answer is read while the request is still going out: a server refusing a large body answers early and
        closes, and a reader that waited for the whole body to leave would lose that answer to the reset."""
        deadline, data, sent = time.monotonic() + timeout, b"", 0
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.setblocking(False)
            while b"\r\n" not in data:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return "timeout"
                writing = [sock] if sent < len(raw) else []
                readable, writable, _ = select.select([sock], writing, [], remaining)
                try:
                    if readable:
                        chunk = sock.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    elif writable:
                        sent += sock.send(raw[sent : sent + 65536])
                except (BrokenPipeError, ConnectionResetError):
                    if not readable:
                        sent = len(raw)  # the server closed while the body went out: read what it said
                        continue
                    break
                except BlockingIOError:
                    continue
        if not data.startswith(b"HTTP/"):
            return "closed"
        return int(data.split(b" ", 2)[1])

    def run(self, count: int, pid: int, time_limit_s: float) -> Report:
        """`count` requests (fewer if `time_limit_s` runs out), with the server's memory before and after."""
        report = Report()
        report.rss_before_mb, _ = memory_mb(pid)
        start = time.monotonic()
        while report.requests < count and time.monotonic() - start < time_limit_s:
            report.statuses[self.send(self.request())] += 1
            report.requests += 1
        report.seconds = time.monotonic() - start
        report.rss_after_mb, report.rss_peak_mb = memory_mb(pid)
        return report


def idle_connections(port: int, count: int) -> list[socket.socket]:
    """`count` connections that sent half a request line and wait: what a slow client holds open."""
    held = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(b"POST /")
        held.append(sock)
    return held


@contextlib.contextmanager
def cli_server(
    args: list[str], probe: str, timeout: float = 180.0, module: str = "wander.cli"
) -> Iterator[tuple[str, subprocess.Popen]]:
    """`python -m MODULE ARGS --port P` (by default `wander ARGS`) as a process of its own on a free loopback port,
    until it answers at `probe`; yield its base URL and the process (its output in `.log`, a file); stop it (SIGTERM,
    then SIGKILL) on exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", module, *args, "--host", "127.0.0.1", "--port", str(port)]
    # The log goes to a file: a pipe nobody reads would fill up and stall a server that logs every request.
    log = tempfile.TemporaryFile()
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    server.log = log  # type: ignore[attr-defined]  # what the server said, for a failing test's message
    try:
        try:
            wait_until_up(url + probe, lambda: server.poll() is None, timeout)
        except AssertionError as e:  # say why: the server's own last words (a port taken meanwhile, a crash)
            log.seek(0)
            said = log.read().decode(errors="replace")[-3000:]
            raise AssertionError(f"{e} (exit {server.poll()}); the server said:\n{said}") from None
        yield url, server
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def wait_until_up(url: str, alive: Callable[[], bool], timeout: float = 180.0) -> None:
    """Poll `url` until it answers; fail when the process dies or the time runs out."""
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            assert alive() and time.monotonic() < deadline, f"no server at {url}"
            time.sleep(0.2)


def server_log(server: subprocess.Popen, tail: int = 3000) -> str:
    """The end of what a `cli_server` process printed."""
    server.log.seek(0)  # type: ignore[attr-defined]
    return server.log.read().decode(errors="replace")[-tail:]  # type: ignore[attr-defined]
