"""wander's environment library: define a task once, evaluate, train and serve it."""

from envs.environment import Environment, SingleTurnEnv
from envs.episode import Episode, EvalResult
from envs.parser import XMLParser
from envs.policies.base import Policy, Reply
from envs.registry import load_environment
from envs.rubric import Rubric
from envs.tool_env import ToolEnv

__all__ = [
    "Environment",
    "Episode",
    "EvalResult",
    "Policy",
    "Reply",
    "Rubric",
    "SingleTurnEnv",
    "ToolEnv",
    "XMLParser",
    "load_environment",
]
