"""How far to trust a judge: its scores against an env's programmatic scorer on the same replies.

python -m wander.eval.judge_agreement --env reverse_text --judge data/models/base --policy expert-0.5 --games 50

Each policy plays the env's eval episodes; the env's rubric scores them (the scorer: its `--scorer` function, by
default the reward), the judge scores the same replies with `--rubric`. Reported: the share of replies on which
both agree on pass/fail at `--threshold` (Wilson interval), the mean absolute difference of the two scores (normal
interval), the pass/fail table of the two (which errors the judge makes: agreement alone hides a judge that
fails everything when most replies fail), and how often the judge gave no usable score, with the first such
answers. Written as JSON to `--out`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from wander.core.atomic_io import write_json
from wander.core.environment import Environment
from wander.core.episode import Episode
from wander.core.registry import load_environment
from wander.core.rubric import Rubric
from wander.core.stats import mean_ci
from wander.policies.judge import Judge
from wander.policies.loading import make_policy


def agreement(env: Environment, judge: Judge, episodes: list[Episode], scorer: str, threshold: float) -> dict:
    """Judge vs the env's `scorer` values on scored `episodes`: pass/fail agreement and mean |difference|."""
    judged = Rubric([judge], [1.0], parser=env.parser).score([e.scoring_inputs() for e in episodes])
    pairs = [
        (s.values[judge.__name__], e.values[scorer] if scorer != "reward" else e.reward)
        for s, e in zip(judged, episodes, strict=True)
        if not s.error
    ]
    passes = [(j >= threshold, v >= threshold) for j, v in pairs]
    gap = [abs(j - v) for j, v in pairs]
    return {
        "episodes": len(episodes),
        "judged": len(pairs),
        "unscored": len(episodes) - len(pairs),
        "unscored_examples": [s.error for s in judged if s.error][:3],
        "threshold": threshold,
        "agreement": mean_ci([float(j == v) for j, v in passes]),
        "table": {
            f"judge {'pass' if j else 'fail'}, scorer {'pass' if v else 'fail'}": passes.count((j, v))
            for j in (True, False)
            for v in (True, False)
        },
        "mean_abs_difference": mean_ci(gap),
        "judge_mean": mean_ci([j for j, _ in pairs]),
        "scorer_mean": mean_ci([v for _, v in pairs]),
        "judge_requests": judge.calls,
    }


def main(argv: list[str] | None = None) -> int:
    """Play, score, judge and write the agreement figure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", required=True, help="an env with a programmatic scorer")
    parser.add_argument("--judge", required=True, help="judge policy spec: a model folder or an OpenAI URL")
    parser.add_argument(
        "--rubric", default="The reply reverses the task's text exactly, character by character."
    )
    parser.add_argument("--reference", default="answer", help="spec key shown to the judge as the reference")
    parser.add_argument("--policy", action="append", required=True, help="policies whose replies are judged")
    parser.add_argument("--games", type=int, default=50, help="eval episodes per policy")
    parser.add_argument("--scorer", default="reward", help="the rubric value compared (default: the reward)")
    parser.add_argument("--threshold", type=float, default=1.0, help="pass at this score and above")
    parser.add_argument("--mode", choices=["each", "group"], default="each")
    parser.add_argument(
        "--verdict", choices=["score", "yes_no"], default="score", help="what the judge answers"
    )
    parser.add_argument("--out", default="data/judge-agreement.json")
    args = parser.parse_args(argv)
    env = load_environment(args.env)
    specs = env.get_dataset("eval").to_list()[: args.games]
    episodes = [e for spec in args.policy for e in env.rollout(make_policy(spec, env=env), specs)]
    judge = Judge.from_spec(
        args.judge, args.rubric, mode=args.mode, verdict=args.verdict, reference=args.reference
    )
    found = {**vars(args), **agreement(env, judge, episodes, args.scorer, args.threshold)}
    write_json(Path(args.out), found)
    print(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
