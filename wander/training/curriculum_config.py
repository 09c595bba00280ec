"""One stage of a GRPO curriculum: the opponents it plays, how it samples, how long it lasts."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class CurriculumStage:
    r"""
    One stage of a [`Curriculum`]: a GRPO run on the environment with some settings changed, starting from the
    previous stage's model.

    Parameters:
        name (`str`):
            Name of the stage; its checkpoints go to `<output_dir>/<index>-<name>`.
        random_move_prob (`tuple[float, float]` or `None`, *optional*, defaults to `None`):
            Range of the opponent's random-move probability in this stage (tic-tac-toe: 0 is perfect minimax, 1 is
            random). `None` keeps the environment's.
        temperature (`float`, *optional*, defaults to `1.0`):
            Sampling temperature of the rollouts.
        max_steps (`int`, *optional*, defaults to `100`):
            Optimizer steps of the stage (fewer when `advance_when` is met first).
        batch_size (`int`, *optional*, defaults to `32`):
            Episodes per optimizer step (the generation batch, reused for `num_iterations` steps):
            `batch_size / num_generations` episode groups, a multiple of the number of difficulty strata so each
            batch covers them all.
        num_generations (`int` or `None`, *optional*, defaults to `None`):
            Episodes per group (same spec, so the same opponent). `None` keeps the trainer config's.
        learning_rate (`float` or `None`, *optional*, defaults to `None`):
            Learning rate of the stage. `None` keeps the trainer config's.
        beta (`float` or `None`, *optional*, defaults to `None`):
            KL coefficient to the stage's start model (TRL's `beta`; above 0 loads it as the reference model).
            `None` keeps the trainer config's.
        advance_when (`dict[str, float]`, *optional*, defaults to `{}`):
            Leave the stage early once every named logged metric (e.g. `"rewards/win/mean"`) averages at least its
            threshold over the curriculum's window of recent logs. Empty: the stage runs `max_steps`.
        env_kwargs (`dict`, *optional*, defaults to `{}`):
            Other environment settings of the stage (fields of the env's config).
    """

    name: str
    random_move_prob: tuple[float, float] | None = None
    temperature: float = 1.0
    max_steps: int = 100
    batch_size: int = 32
    num_generations: int | None = None
    learning_rate: float | None = None
    beta: float | None = None
    advance_when: dict[str, float] = field(default_factory=dict)
    env_kwargs: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name or "/" in self.name:
            raise ValueError(f"a stage needs a name usable as a folder name, got {self.name!r}")
        if self.max_steps < 1 or self.batch_size < 1:
            raise ValueError(f"stage {self.name!r}: max_steps and batch_size must be at least 1")
        if self.temperature <= 0:
            raise ValueError(
                f"stage {self.name!r}: temperature must be positive (GRPO samples), got {self.temperature}"
            )
        if self.beta is not None and self.beta < 0:
            raise ValueError(f"stage {self.name!r}: beta must be at least 0, got {self.beta}")
        if self.random_move_prob is not None:
            low, high = self.random_move_prob = tuple(float(x) for x in self.random_move_prob)
            if not 0.0 <= low <= high <= 1.0:
                raise ValueError(f"stage {self.name!r}: random_move_prob must be a range within [0, 1]")

    def to_dict(self) -> dict:
        """The stage as a plain dict (for params files and MLflow)."""
        return asdict(self)
