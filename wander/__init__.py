"""wander: define an RL environment once; evaluate any model in it, train with TRL, serve it the OpenEnv way."""

from wander.core.environment import Environment, SingleTurnEnv
from wander.core.episode import Episode, EvalResult
from wander.core.parser import XMLParser
from wander.core.policy import Policy, Reply
from wander.core.registry import load_environment
from wander.core.rubric import Rubric
from wander.core.tool_env import ToolEnv
from wander.training.compose import TrainerSpec, trainer_spec

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
