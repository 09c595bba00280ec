"""Training composition: `env >> trainer_spec(GRPOTrainer, ...)` and friends (TRL trainers on an environment)."""

from envs.training.checkpoints import last_checkpoint, train_resumable
from envs.training.compose import TrainerSpec, compose, trainer_spec
from envs.training.curriculum_config import CurriculumStage
from envs.training.preferences_config import PreferenceConfig
from envs.training.rollout_config import RolloutConfig
from envs.training.sft_data_config import SFTDataConfig

__all__ = [
    "CurriculumStage",
    "PreferenceConfig",
    "RolloutConfig",
    "SFTDataConfig",
    "TrainerSpec",
    "compose",
    "last_checkpoint",
    "train_resumable",
    "trainer_spec",
]
