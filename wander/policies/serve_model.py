"""`wander serve-model PATH`: a checkpoint served by vLLM on loopback until Ctrl-C (vllm_server.py beside it)."""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
from typing import Any

from wander.policies.vllm_server import VLLMServer
from wander.policies.vllm_server_config import VLLMServerConfig


def serve_model_command(args: argparse.Namespace) -> int:
    """Start vLLM for the model, print its URL once it answers, and stop its whole process group on exit."""
    config = VLLMServerConfig(
        python=args.python,
        host=args.host,
        port=args.port,
        dtype=args.dtype,
        max_model_len=args.max_model_len,
        kv_cache_gb=args.kv_cache_gb,
        startup_timeout=args.startup_timeout,
        extra_args=shlex.split(args.vllm_args),
    )
    server = VLLMServer(args.path, config, name=args.name, log=None if args.quiet else "-")
    # SIGTERM (a process manager, `kill`) stops the server as Ctrl-C does.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with server:
            print(
                f"vLLM serving {args.path} as {server.name!r} at {server.base_url} (Ctrl-C stops it)",
                flush=True,
            )
            code = server.wait()
        print(f"vLLM exited with code {code}")
        return 1 if code else 0
    except KeyboardInterrupt:
        print("stopped")
        return 0
    # It did not start: one message, its log tail.
    except (RuntimeError, TimeoutError, FileNotFoundError) as exc:
        print(f"wander: error: {exc}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def register(sub: Any, port_type: Any = int) -> None:
    """Add the `serve-model` subcommand to the `wander` parser's subparsers."""
    defaults = VLLMServerConfig()
    p = sub.add_parser(
        "serve-model", help="serve a model folder through vLLM (OpenAI-compatible) until Ctrl-C"
    )
    p.add_argument("path", help="model folder (a checkpoint such as data/models/sft) or hub id")
    p.add_argument(
        "--name", default=None, help="model name the server answers to (default: the folder's name)"
    )
    p.add_argument("--host", default=defaults.host, help="interface to bind (default loopback only)")
    p.add_argument("--port", type=port_type, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--dtype", default=defaults.dtype, help="vLLM --dtype (default float32, as transformers)")
    p.add_argument("--max-model-len", type=int, default=defaults.max_model_len, help="context in tokens")
    p.add_argument("--kv-cache-gb", type=float, default=defaults.kv_cache_gb, help="CPU build: KV cache GiB")
    p.add_argument("--startup-timeout", type=float, default=defaults.startup_timeout, help="seconds")
    p.add_argument(
        "--python", default=None, help="python of the vLLM venv (default: .venv-vllm, `make vllm`)"
    )
    p.add_argument("--quiet", action="store_true", help="vLLM's output to a temporary log, not the terminal")
    p.add_argument(
        "--vllm-args",
        default="",
        metavar="'ARGS'",
        help="more arguments of vLLM's server, quoted: --vllm-args '--gpu-memory-utilization 0.3' (one flag: --vllm-args=--flag)",
    )
    p.set_defaults(func=serve_model_command)
