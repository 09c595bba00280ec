"""The `wander` command line's argument types and the evaluation options its commands share."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from wander.core.pipeline_hooks import DEFAULT_SUITE_GAMES
from wander.core.registry import DEFAULT_ENV, load_environment
from wander.eval.config import EvaluateConfig


def positive_int(text: str) -> int:
    """A positive integer from the command line."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def positive_float(text: str) -> float:
    """A positive number of seconds from the command line."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{value} must be a positive number")
    return value


def port_number(text: str) -> int:
    """A TCP port from the command line: an integer from 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0-65535)")
    return port


def env_setting(text: str) -> tuple[str, object]:
    """A `KEY=VALUE` environment setting; the value is read as YAML (`8`, `0.5`, `[0.0, 0.5]`, `full`)."""
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"{text!r} is not a KEY=VALUE environment setting")
    try:
        return key, yaml.safe_load(value)
    except yaml.YAMLError:
        return key, value


def parse_policies(items: list[str]) -> dict[str, str]:
    """Row names for policy specs: `name=spec`, or the spec's own short name (a folder's last part)."""
    policies: dict[str, str] = {}
    for item in items:
        name, sep, spec = item.partition("=")
        # A URL's query string may hold '='; only a plain word before it is a row name.
        if not sep or not name or any(c in name for c in "/:"):
            spec = item
            name = item if item.startswith(("http://", "https://")) else Path(item.rstrip("/")).name or item
        if not spec:
            raise ValueError(f"policy {item!r} has an empty spec; write NAME=SPEC or just SPEC")
        if name in policies:
            raise ValueError(
                f"two policies are named {name!r}; give them distinct row names with NAME=SPEC, e.g. sft={spec}"
            )
        policies[name] = spec
    return policies


def env_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The `load_environment` kwargs of parsed `add_arguments` options (the settings given)."""
    return {"name": args.env, **dict(args.settings)}


def add_arguments(parser: argparse.ArgumentParser, rows: bool = True) -> None:
    """The evaluation options of `wander eval` and (without rows) `wander compare`."""
    defaults = {name: info.default for name, info in EvaluateConfig.model_fields.items()}
    if rows:
        parser.add_argument(
            "--policy",
            action="append",
            metavar="[NAME=]SPEC",
            help="a row: scripted player (tictactoe: random, minimax-0.5, expert; any env: expert-<slip>, its "
            "teacher), model folder, hub id or OpenAI-compatible URL; repeat for more rows (default: the env's "
            "reference players; tictactoe: random and minimax)",
        )
        parser.add_argument("--baseline", default=None, help="row the report compares the others against")
    parser.add_argument("--env", default=DEFAULT_ENV, help="environment: registered name or module path")
    parser.add_argument(
        "--opponents",
        default=None,
        help="comma-separated suite columns (tictactoe: random, minimax-<p>; others: stratum-<k>); "
        "default: the env's",
    )
    parser.add_argument(
        "--games",
        type=int,
        default=defaults["games"],
        help="games per opponent and side (default: the env's, the most episodes every cell holds, at most "
        f"{DEFAULT_SUITE_GAMES})",
    )
    parser.add_argument(
        "--temperature", type=float, default=defaults["temperature"], help="0 = greedy, > 0 = sampled"
    )
    parser.add_argument(
        "--seed", type=int, default=defaults["seed"], help="seed of the frozen suite and policies"
    )
    parser.add_argument(
        "--samples",
        type=int,
        default=defaults["samples"],
        help="times each item is played per policy, each with its own seed; above 1 the report adds pass@1, "
        "pass@k and avg@k (needs --temperature above 0)",
    )
    parser.add_argument(
        "--pass-threshold",
        type=float,
        default=defaults["pass_threshold"],
        help="the headline metric's value an episode must reach to pass (pass@k); default: its best value",
    )
    parser.add_argument("--max-new-tokens", type=int, default=defaults["max_new_tokens"])
    parser.add_argument(
        "--max-batch-size", type=int, default=defaults["max_batch_size"], help="most games per policy call"
    )
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        type=env_setting,
        default=[],
        metavar="KEY=VALUE",
        help="an environment setting, repeatable (tictactoe: --set rendering=compact --set history=full); "
        "unset, the env keeps its own defaults",
    )
    parser.add_argument(
        "--api-model",
        default=defaults["api_model"],
        help="model name for OpenAI-compatible URLs (default: the one model the endpoint lists at /models)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def config_from_args(args: argparse.Namespace, out_dir: str) -> EvaluateConfig:
    """An EvaluateConfig from parsed `add_arguments` options."""
    return EvaluateConfig(
        policies=parse_policies(
            args.policy or list(load_environment(**env_from_args(args)).reference_policies)
        ),
        references=[],  # the rows are the --policy ones, or the references alone
        opponents=[o.strip() for o in args.opponents.split(",") if o.strip()] if args.opponents else None,
        games=args.games,
        seed=args.seed,
        temperature=args.temperature,
        samples=args.samples,
        pass_threshold=args.pass_threshold,
        max_new_tokens=args.max_new_tokens,
        max_batch_size=args.max_batch_size,
        api_model=args.api_model,
        out_dir=out_dir,
        baseline=getattr(args, "baseline", None),
        progress=not args.no_progress,
    )
