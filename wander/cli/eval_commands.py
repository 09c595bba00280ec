"""`wander eval`, `wander compare` and `wander rescore`: a policy's evaluation, two policies' comparison, a stored
evaluation scored again."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from wander.cli.arguments import add_arguments, config_from_args, env_from_args, env_setting
from wander.core.registry import DEFAULT_ENV, load_environment
from wander.eval.compare import compare, conclusion
from wander.eval.evaluation import evaluate, text_table
from wander.eval.matrix import run_matrix


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


def register(sub: Any) -> None:
    """Add `eval`, `rescore` and `compare` to the `wander` parser's subparsers."""
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
