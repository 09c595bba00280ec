"""A model served by vLLM's OpenAI-compatible server, in a child process of vLLM's own venv.

```python
with VLLMServer("data/models/sft") as server:  # started on a free loopback port, stopped on exit
    policy = make_policy(server.base_url, model=server.name)
```

vLLM cannot share the project's venv (it pins an older transformers), so the server runs from `.venv-vllm`
(`make vllm`). The child gets a process group of its own (wander.core.process_tree): stopping signals the whole
group (the API server and its engine-core processes), SIGTERM first, SIGKILL after a grace period, and the server
also receives SIGTERM if this process dies first (Linux `PR_SET_PDEATHSIG`; it fires when the *thread* that started
the server ends, so start it from a thread that outlives its use, as the stages and `wander serve-model` do from
the main thread). Its output goes to a log file whose tail is shown when it fails to start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from wander.core.process_tree import start_group, stop_group
from wander.policies.vllm_server_config import VLLMServerConfig

logger = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now (the OS's pick); vLLM binds it moments later."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class VLLMServer:
    """vLLM serving `model` (a model folder or hub id) under `name`; a context manager that starts and stops it.

    `log`: where the server's output goes (`None`: a temporary file, removed after a clean stop; `"-"`: this
    process's own stdout and stderr).
    """

    def __init__(
        self,
        model: str | os.PathLike,
        config: VLLMServerConfig | None = None,
        name: str | None = None,
        log: str | os.PathLike | None = None,
    ) -> None:
        self.config = config or VLLMServerConfig()
        path = Path(model)
        self.model = str(path.resolve()) if path.exists() else str(model)  # the child runs elsewhere
        self.name = name or (path.name if path.exists() else str(model))
        self.log = log
        self.process: subprocess.Popen | None = None
        self.port: int | None = None
        self._log_path: Path | None = None

    @property
    def root_url(self) -> str:
        """`http://host:port` of the running server."""
        if self.port is None:
            raise RuntimeError("the vLLM server is not started")
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        return f"http://{host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL (`.../v1`)."""
        return f"{self.root_url}/v1"

    def command(self) -> list[str]:
        """The command line that starts the server."""
        c = self.config
        cmd = [str(c.python_path()), "-m", "vllm.entrypoints.openai.api_server", "--model", self.model]
        cmd += ["--served-model-name", self.name, "--host", c.host, "--port", str(self.port)]
        cmd += ["--dtype", c.dtype, "--seed", str(c.seed), "--disable-uvicorn-access-log"]
        if c.enforce_eager:
            cmd.append("--enforce-eager")
        if c.max_model_len is not None:
            cmd += ["--max-model-len", str(c.max_model_len)]
        return cmd + list(c.extra_args)

    def environment(self) -> dict[str, str]:
        """The child's environment: ours without venv paths, offline, no usage stats, the CPU KV cache size."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{self.config.kv_cache_gb:g}")
        env.update(VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1", HF_HUB_OFFLINE=env.get("HF_HUB_OFFLINE", "1"))
        return {**env, **self.config.env_vars}

    def start(self) -> str:
        """Start the server and wait until `/health` answers 200; return the base URL. Failing, it is stopped."""
        if self.process is not None:
            raise RuntimeError("the vLLM server is already started")
        self.port = self.config.port or free_port(self.config.host)
        cmd = self.command()
        if self.log == "-":
            out = None
        else:
            if self.log is None:
                fd, name = tempfile.mkstemp(prefix="vllm-", suffix=".log")
                os.close(fd)
                self._log_path = Path(name)
            else:
                self._log_path = Path(self.log)
                self._log_path.parent.mkdir(parents=True, exist_ok=True)
            out = self._log_path.open("ab")
        logger.info("starting vLLM for %s as %r on %s", self.model, self.name, self.root_url)
        start = time.monotonic()
        try:
            # Its own process group: Ctrl-C here does not reach it, stop() does; it dies with this process.
            self.process = start_group(
                cmd,
                die_with_parent=True,
                env=self.environment(),
                cwd=tempfile.gettempdir(),  # `-m` puts the working folder on sys.path: keep the repo's off it
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT if out is not None else None,
            )
        finally:
            if out is not None:
                out.close()
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop(keep_log=True)
            raise
        logger.info("vLLM ready at %s after %.0f s", self.base_url, time.monotonic() - start)
        return self.base_url

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.config.startup_timeout
        url = f"{self.root_url}/health"
        while True:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(f"vLLM exited with code {code} before it was ready{self._tail()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"vLLM did not answer at {url} within {self.config.startup_timeout:.0f} s{self._tail()}"
                )
            time.sleep(0.5)

    def _tail(self, lines: int = 30) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        text = self._log_path.read_text(errors="replace").splitlines()[-lines:]
        return f"; its log ({self._log_path}) ends with:\n" + "\n".join(text)

    def stop(self, grace: float = 20.0, keep_log: bool = False) -> int | None:
        """Stop the whole process group: SIGTERM, then SIGKILL after `grace` seconds; return the exit code."""
        process, self.process = self.process, None
        code = None
        if process is not None:
            code = stop_group(process, grace)  # engine-core children that outlive the API server go too
        if self.log is None and self._log_path is not None and not keep_log:
            self._log_path.unlink(missing_ok=True)
        return code

    def wait(self) -> int:
        """Block until the server exits by itself (foreground use); return its exit code."""
        if self.process is None:
            raise RuntimeError("the vLLM server is not started")
        return self.process.wait()

    def __enter__(self) -> VLLMServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def serve_model(
    model: str | os.PathLike, config: VLLMServerConfig | None = None, name: str | None = None
) -> Iterator[VLLMServer]:
    """`model` served by vLLM for the duration of the block."""
    with VLLMServer(model, config, name) as server:
        yield server
