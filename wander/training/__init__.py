"""Training composition: `env >> trainer_spec(GRPOTrainer, ...)` and friends (TRL trainers on an environment)."""

from wander.training.checkpoints import drop_checkpoints, last_checkpoint, train_resumable
from wander.training.compose import TrainerSpec, compose, trainer_spec
from wander.training.curriculum_config import CurriculumStage
from wander.training.preferences_config import PreferenceConfig
from wander.training.rollout_config import RolloutConfig
from wander.training.sft_data_config import SFTDataConfig

__all__ = [
    "CurriculumStage",
    "PreferenceConfig",
    "RolloutConfig",
    "SFTDataConfig",
    "TrainerSpec",
    "compose",
    "drop_checkpoints",
    "last_checkpoint",
    "train_resumable",
    "trainer_spec",
]
