"""Resume only the same run (fingerprinted folder), and only from a whole checkpoint (torn ones skipped)."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import TrainerCallback

from wander.training.checkpoints import (
    RUN_FILE,
    drop_checkpoints,
    is_complete,
    last_checkpoint,
    run_dir,
    train_resumable,
)

from .conftest import cpu_args

STEPS = 4


class Die(TrainerCallback):
    """Raise after a given step, as if the machine went down: its checkpoints stay on disk."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise KeyboardInterrupt(f"killed after step {state.global_step}")


class Steps(TrainerCallback):
    """Which optimizer steps this process actually ran."""

    def __init__(self):
        self.ran: list[int] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.ran.append(state.global_step)


def make_trainer(env, model, out, learning_rate=1e-3, *callbacks):
    from trl import SFTConfig, SFTTrainer

    from wander.training import trainer_spec
    from wander.training.sft_data_config import SFTDataConfig

    args = cpu_args(
        SFTConfig,
        str(out),
        max_steps=STEPS,
        save_strategy="steps",
        save_steps=2,
        per_device_train_batch_size=8,
        learning_rate=learning_rate,
    )
    data = SFTDataConfig(teacher="minimax-0.2", num_episodes=48)
    trainer = env >> trainer_spec(SFTTrainer, model=model, args=args, data=data)
    for callback in callbacks:
        trainer.add_callback(callback)
    return trainer


def weights(trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def same(a: dict, b: dict) -> bool:
    return all(torch.allclose(a[k], b[k], rtol=1e-4, atol=1e-6) for k in a)


@pytest.fixture(scope="module")
def whole(env, tiny_model, tmp_path_factory):
    """The weights of an uninterrupted run (fingerprint 'a')."""
    trainer = make_trainer(env, tiny_model, tmp_path_factory.mktemp("whole"))
    train_resumable(trainer, fingerprint="a")
    return weights(trainer)


def killed_at_3(env, model, out, fingerprint="a"):
    """A run killed after step 3: checkpoint-2 is whole; then a torn checkpoint-4 as a kill during its save leaves."""
    with pytest.raises(KeyboardInterrupt):
        train_resumable(make_trainer(env, model, out, 1e-3, Die(3)), fingerprint=fingerprint)
    folder = out / fingerprint
    assert is_complete(folder / "checkpoint-2")
    (folder / "checkpoint-4").mkdir()
    (folder / "checkpoint-4" / "model.safetensors").write_bytes(b"")  # the weights were being written
    (folder / "checkpoint-6").mkdir()  # and an empty one for good measure
    return folder


@pytest.mark.slow
def test_a_killed_run_resumes_from_its_last_whole_checkpoint_and_ends_as_an_uninterrupted_one(
    env, tiny_model, tmp_path, whole
):
    folder = killed_at_3(env, tiny_model, tmp_path)
    assert last_checkpoint(folder) == str(folder / "checkpoint-2")
    steps = Steps()
    trainer = make_trainer(env, tiny_model, tmp_path, 1e-3, steps)
    train_resumable(trainer, fingerprint="a")
    assert steps.ran == [3, 4]  # from checkpoint-2, not from the torn ones, not from scratch
    assert same(weights(trainer), whole)
    assert trainer.args.output_dir == str(folder)
    # Kept until the caller saved the model: a stop during that save resumes from the last step's checkpoint.
    assert last_checkpoint(folder) == str(folder / f"checkpoint-{STEPS}")
    assert (
        drop_checkpoints(trainer.args.output_dir) and not folder.exists()
    )  # saved: nothing is left to resume


@pytest.mark.slow
def test_other_inputs_start_fresh_and_remove_the_old_runs_checkpoints(env, tiny_model, tmp_path, whole):
    old = killed_at_3(env, tiny_model, tmp_path, fingerprint="a")
    steps = Steps()
    trainer = make_trainer(env, tiny_model, tmp_path, 5e-3, steps)  # a changed learning rate: fingerprint "b"
    train_resumable(trainer, fingerprint="b")
    assert steps.ran == [1, 2, 3, 4]
    assert not old.exists() and [p.name for p in tmp_path.iterdir()] == ["b"]
    assert not same(weights(trainer), whole)


def test_a_checkpoint_is_whole_only_with_weights_and_a_readable_trainer_state(tmp_path):
    path = tmp_path / "checkpoint-5"
    path.mkdir()
    assert not is_complete(path)
    (path / "model.safetensors").write_bytes(b"weights")
    assert not is_complete(path)
    (path / "trainer_state.json").write_text('{"global_step": 5, "log_hi')  # torn mid-write
    assert not is_complete(path)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": 5}))
    assert is_complete(path)
    (path / "model.safetensors").write_bytes(b"")
    assert not is_complete(path)


def test_run_dir_removes_only_other_runs_and_loose_checkpoints(tmp_path):
    other = run_dir(tmp_path, "old")
    (other / "checkpoint-2").mkdir()
    (tmp_path / "checkpoint-7").mkdir()  # the layout before fingerprints
    (tmp_path / "notes").mkdir()  # not ours: stays
    (tmp_path / "notes.txt").write_text("keep")
    path = run_dir(tmp_path, "new")
    assert path == tmp_path / "new" and (path / RUN_FILE).is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "notes", "notes.txt"]
    with pytest.raises(ValueError):
        run_dir(tmp_path, "../escape")


def test_drop_checkpoints_removes_only_a_run_folder(tmp_path):
    mine = tmp_path / "mine"
    (mine / "checkpoint-1").mkdir(parents=True)  # a caller's own output_dir, no fingerprint folder
    assert not drop_checkpoints(mine) and (mine / "checkpoint-1").is_dir()
    run = run_dir(tmp_path / "out", "fp")
    (run / "checkpoint-1").mkdir()
    assert drop_checkpoints(run) and not run.exists()
