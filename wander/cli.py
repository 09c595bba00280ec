"""The `wander` command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wander.core.logs import configure_logging
from wander.core.offline import stay_offline
from wander.core.pipeline_hooks import DEFAULT_SUITE_GAMES
from wander.core.registry import DEFAULT_ENV, load_environment
from wander.eval.compare import compare, conclusion
from wander.eval.config import EvaluateConfig
from wander.eval.evaluation import evaluate, text_table
from wander.eval.matrix import MatrixInterrupted, run_matrix
from wander.policies import serve_model
from wander.policies.openai_policy import PolicyRequestError
from wander.scaffold import DEFAULT_KIND, KINDS, init_environment
from wander.serve.limits import CLIENT_SHARE, IDLE_TTL_S, MAX_SESSIONS, per_client_limit
from wander.ui import app as ui_app


def eval_command(args: argparse.Namespace) -> int:
    """Play each policy on the env's evaluation suite, print the table and write the report."""
    config = config_from_args(args, args.out)
    result = evaluate(config, env=env_from_args(args))
    print(text_table(result))
    if result.resumed:  # a rerun of a killed evaluation: what it did not play again
        played = sum(len(episodes) for episodes in result.episodes.values()) - result.resumed
        print(f"\nresumed {result.resumed} episodes from the journal, played {played}")
    print(f"\nreport, plots, metrics and CSV written to {config.out_dir}/")
    return 0


def compare_command(args: argparse.Namespace) -> int:
    """Play A and B on the same frozen suite and say per column whether B is better, from the intervals."""
    args.policy = [args.a, args.b]
    config = config_from_args(args, args.out or "")
    env = env_from_args(args)
    result = evaluate(config, env=env) if args.out else run_matrix(config, env=env)
    a, b = config.policies
    rows_a, rows_b = ([r for r in result.rows if r["policy"] == name] for name in (a, b))
    metric = result.suite.comparable(args.metric or result.headline)
    found = compare(rows_a, rows_b, metric)
    print(f"{metric.name} of B = {b} against A = {a}: {result.games} games per cell, {config.decoding}")
    print(f"{'column':<26}{'A [95% CI]':>22}{'B [95% CI]':>22}  verdict")
    for c in found:
        column = "all (pooled)" if c["opponent"] == "all" else f"{c['opponent']} {c['side']}"
        a_ci, b_ci = (f"{c[k]:.3f} [{c[k + '_ci_low']:.3f},{c[k + '_ci_high']:.3f}]" for k in ("a", "b"))
        print(f"{column:<26}{a_ci:>22}{b_ci:>22}  {c['verdict']}")
    print(conclusion(found, a, b))
    return 0


def teacher_command(args: argparse.Namespace) -> int:
    """Serve an env's embedded teacher over the OpenAI protocol until interrupted."""
    from wander.core.registry import load_environment
    from wander.policies.openai_server import serve_forever, teacher_app

    env = load_environment(args.env)
    skill, model = env.teacher_skill if args.skill is None else args.skill, args.model or env.teacher_model
    app = teacher_app(env, skill, model)
    print(f"teacher {model!r} (skill {skill}) at http://{args.host}:{args.port}/v1")
    serve_forever(app, host=args.host, port=args.port)
    return 0


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


def rescore_command(args: argparse.Namespace) -> int:
    """Replay and score a stored evaluation with the env's current rubric; write its report; say what changed."""
    from wander.eval.rescore import evaluation_files, rescore_to

    episodes, _ = evaluation_files(args.source)
    out = Path(args.out or f"{episodes.parent}-rescored")
    done = rescore_to(args.source, load_environment(**env_from_args(args)), out)
    print(text_table(done.result))
    total = sum(len(e) for e in done.result.episodes.values())
    print(f"\n{total} episodes rescored; {len(done.changed)} changed score, {len(done.diverged)} diverged")
    for c in done.changed[:20]:
        print(f"  {c['policy']} {c['opponent']} {c['side']} seed {c['seed']}: {c['was']} -> {c['now']}")
    print(f"report written to {out}/")
    return 0


def env_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The `load_environment` kwargs of parsed `add_arguments` options (the settings given)."""
    return {"name": args.env, **dict(args.settings)}


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


def env_serve_command(args: argparse.Namespace) -> int:
    """Serve an environment over OpenEnv's protocol until interrupted."""
    from wander.core.registry import load_environment
    from wander.serve.server import serve_env_forever
    from wander.serve.workers import serve_env_workers, session_shares

    shares = session_shares(args.max_sessions, args.workers)  # a bad split is an error before the env loads
    per_client = per_client_limit(args.max_sessions, args.max_sessions_per_client)
    if args.web and args.workers > 1:
        raise ValueError("--web serves one shared browser episode from one process: drop --workers or --web")
    try:
        env = load_environment(args.name, **dict(args.settings))
    except TypeError as exc:  # an unknown setting: the factory names it
        raise ValueError(str(exc)) from None
    workers = f", {args.workers} worker processes with {shares} sessions" if args.workers > 1 else ""
    web = f"; OpenEnv's web interface at http://{args.host}:{args.port}/web/" if args.web else ""
    print(
        f"environment {env.name!r} over OpenEnv at http://{args.host}:{args.port} (WebSocket sessions at /ws, "
        f"at most {args.max_sessions}, {per_client} per client, idle TTL {args.idle_ttl:g} s{workers}){web}",
        flush=True,
    )
    options = dict(
        max_sessions=args.max_sessions,
        max_sessions_per_client=per_client,
        idle_ttl_s=args.idle_ttl,
        threaded=args.threaded,
        reset_seed=args.seed,
        web=args.web,
    )
    if args.workers > 1:
        return serve_env_workers(env, host=args.host, port=args.port, workers=args.workers, **options)
    serve_env_forever(env, host=args.host, port=args.port, **options)
    return 0


def env_init_command(args: argparse.Namespace) -> int:
    """Scaffold a working environment folder envs/NAME and say how to run it."""
    folder = init_environment(args.name, kind=args.kind)
    print(
        f"created {folder}/ ({args.kind}: factory, rubric, teacher, README.md, recipe.yaml, test_{args.name}.py); try it:\n"
        f"  pytest {folder}\n  wander eval --env {args.name} --games 4\n  dvc exp run -S env.name={args.name}"
    )
    return 0


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


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="wander", description="Train small LMs with RL inside environments."
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="other libraries' INFO logs and progress bars too (as stages do)",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    ev = sub.add_parser("eval", help="the env's evaluation suite for one or more policies, with a report")
    add_arguments(ev)
    ev.add_argument("--out", default="data/eval-adhoc", help="folder of the report, plots, metrics and CSV")
    ev.set_defaults(func=eval_command)

    rs = sub.add_parser("rescore", help="score a stored evaluation's episodes with the env's current rubric")
    rs.add_argument(
        "source", metavar="RUN_OR_FILE", help="an evaluation folder (data/eval) or its episodes file"
    )
    rs.add_argument("--env", default=DEFAULT_ENV, help="environment: registered name or module path")
    rs.add_argument(
        "--set", dest="settings", action="append", type=env_setting, default=[], metavar="KEY=VALUE"
    )
    rs.add_argument(
        "--out", default=None, help="folder of the new report (default: the evaluation's, + -rescored)"
    )
    rs.set_defaults(func=rescore_command)

    cmp = sub.add_parser("compare", help="is policy B better than policy A? per column, from the intervals")
    cmp.add_argument("a", metavar="A", help="[NAME=]SPEC of the reference policy")
    cmp.add_argument("b", metavar="B", help="[NAME=]SPEC of the challenger")
    add_arguments(cmp, rows=False)
    cmp.add_argument(
        "--metric",
        default=None,
        help="a metric of the env's evaluation suite with an interval (tictactoe: non_loss, win, loss, ...); "
        "default: the suite's headline",
    )
    cmp.add_argument("--out", default=None, help="also write the full report to this folder")
    cmp.set_defaults(func=compare_command)

    teacher = sub.add_parser("teacher", help="the embedded teacher model server")
    teacher_sub = teacher.add_subparsers(dest="teacher_command", required=True)
    serve = teacher_sub.add_parser(
        "serve", help="serve the teacher over the OpenAI Chat Completions protocol"
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default loopback only)")
    serve.add_argument("--port", type=port_number, default=8000, help="port (default 8000)")
    serve.add_argument("--env", default=DEFAULT_ENV, help="environment whose teacher to serve")
    serve.add_argument(
        "--skill",
        type=float,
        default=None,
        help="slip rate (tictactoe: random-move probability in quiet positions); default: the env's",
    )
    serve.add_argument("--model", default=None, help="model name the server answers to; default: the env's")
    serve.set_defaults(func=teacher_command)

    env_cmd = sub.add_parser("env", help="environments: serve one, or scaffold a new one")
    env_sub = env_cmd.add_subparsers(dest="env_command", required=True)
    env_serve = env_sub.add_parser(
        "serve", help="serve an environment over OpenEnv's protocol (WebSocket sessions, Task API)"
    )
    env_serve.add_argument("name", help="registered environment (tictactoe) or module path")
    env_serve.add_argument(
        "settings",
        nargs="*",
        type=env_setting,
        metavar="KEY=VALUE",
        help="environment settings, e.g. rendering=compact max_turns=8 history=full",
    )
    env_serve.add_argument("--host", default="127.0.0.1", help="interface to bind (default loopback only)")
    env_serve.add_argument("--port", type=port_number, default=8000, help="port (default 8000)")
    env_serve.add_argument(
        "--max-sessions",
        type=positive_int,
        default=MAX_SESSIONS,
        help=f"concurrent sessions, WebSocket and HTTP MCP together (default {MAX_SESSIONS})",
    )
    env_serve.add_argument(
        "--max-sessions-per-client",
        type=positive_int,
        default=None,
        help="sessions one client (an IP address; behind a proxy, the proxy) may hold at once "
        f"(default {CLIENT_SHARE * 100:g}%% of --max-sessions)",  # %%: argparse %-formats help
    )
    env_serve.add_argument(
        "--idle-ttl",
        type=positive_float,
        default=IDLE_TTL_S,
        help=f"seconds before an idle session of either kind is closed (default {IDLE_TTL_S:g})",
    )
    env_serve.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="server processes sharing the port, each stepping on its own core; --max-sessions is split "
        "among them (default 1)",
    )
    env_serve.add_argument(
        "--threaded",
        action="store_true",
        help="run each session's steps in its own thread (for environments that block on I/O)",
    )
    env_serve.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the episode seeds drawn for a reset that names none (reset with no arguments; default 0)",
    )
    env_serve.add_argument(
        "--web", action="store_true", help="also serve OpenEnv's Gradio web interface at /web/"
    )
    env_serve.set_defaults(func=env_serve_command)
    env_init = env_sub.add_parser(
        "init",
        help="scaffold a working environment folder envs/NAME (factory, rubric, teacher, README, recipe, test), "
        "found by its name with no edit elsewhere; run from the project root",
    )
    env_init.add_argument("name", help="the new environment's name: lowercase letters, digits, underscores")
    env_init.add_argument(
        "--kind",
        choices=list(KINDS),
        default=DEFAULT_KIND,
        help=f"the starter task's kind (default {DEFAULT_KIND})",
    )
    env_init.set_defaults(func=env_init_command)

    serve_model.register(sub, port_number)
    ui_app.register(sub, port_number)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of `wander`."""
    stay_offline()  # before any tool (MLflow, the hub) is asked anything
    args = build_parser().parse_args(argv)
    configure_logging("wander", args.verbose)  # the stages' log setup: progress lines, no library chatter
    try:
        return args.func(args)
    except ValueError as exc:
        print(f"wander: error: {exc}", file=sys.stderr)
        return 2
    except (PolicyRequestError, MatrixInterrupted) as exc:  # an endpoint that failed: one line, no traceback
        print(f"wander: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
