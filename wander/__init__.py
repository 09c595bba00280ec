"""wander: define an RL environment once; evaluate any model in it, train with TRL, serve it the OpenEnv way.

The registries of things found by name are filled here, at the entry every `import wander...` passes first, so every
entry point (the CLI, the stages, the UI, a notebook) finds them and no layer names one above it: the catalogue of
environment folders below, and `openenv:URL`, which importing wander.serve registers (a cheap import: its server and
client load when such a name is used). Policy kinds register in wander.policies.loading, beside `make_policy`."""

import wander.serve  # noqa: F401  registers the `openenv:` environment scheme
from wander.core.environment import Environment, SingleTurnEnv
from wander.core.episode import Episode, EvalResult
from wander.core.parser import XMLParser
from wander.core.policy import Policy, Reply
from wander.core.registry import CATALOGUES, load_environment
from wander.core.rubric import Rubric
from wander.core.tool_env import ToolEnv
from wander.training.compose import TrainerSpec, trainer_spec

CATALOGUES.register("envs", "the project's environments, one self-contained folder each")

__all__ = [
    "Environment",
    "Episode",
    "EvalResult",
    "Policy",
    "Reply",
    "Rubric",
    "SingleTurnEnv",
    "ToolEnv",
    "TrainerSpec",
    "XMLParser",
    "load_environment",
    "trainer_spec",
]
