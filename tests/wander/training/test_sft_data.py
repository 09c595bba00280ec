"""SFT data from trajectories: rows reproduce episodes exactly; filters are plain predicates."""

from __future__ import annotations

import pytest
from datasets import Dataset

from envs.tictactoe.players import RandomPlayer, board_of
from wander.core.policy import Reply
from wander.training.sft_data import FILTERS, play_teacher, resolve_filters, sft_dataset, sft_rows
from wander.training.sft_data_config import SFTDataConfig


class SloppyPlayer(RandomPlayer):
    """Random legal moves, but an off-board first move in some games and untagged answers on boards with no X."""

    def __call__(self, conversations):
        replies = []
        for conversation in conversations:
            board = board_of(conversation)
            first = sum(m["role"] == "assistant" for m in conversation) == 0
            if first and len(conversation[1]["content"]) % 2:
                replies.append(Reply("<move>9</move>"))
            else:
                replies.append(
                    Reply(f"<move>{self.choose(board)}</move>" if "X" in board else str(self.choose(board)))
                )
        return replies


def test_rows_reproduce_each_episodes_messages_exactly(env):
    episodes = play_teacher(env, SFTDataConfig(teacher="expert-0.5", num_episodes=24, filters=()))
    rows = sft_rows(episodes)
    assert len(rows) == 24
    stored = Dataset.from_list(rows)  # through Arrow and back, as SFTTrainer reads it
    for episode, row in zip(episodes, stored, strict=True):
        assert row["messages"] == episode.messages
        assert [m["role"] for m in row["messages"]][:3] == ["system", "user", "assistant"]


def test_filters_drop_losses_invalid_moves_and_format_failures(env):
    episodes = play_teacher(env, SFTDataConfig(teacher=SloppyPlayer(seed=1), num_episodes=40, filters=()))
    lost = [e for e in episodes if e.values["loss"] == 1]
    invalid = [e for e in episodes if e.values["invalid_moves"] > 0]
    sloppy = [e for e in episodes if e.values["format"] < 1]
    assert lost and invalid and sloppy  # the fixture covers every filter
    for name, bad in (("not_lost", lost), ("no_invalid_moves", invalid), ("well_formatted", sloppy)):
        kept = sft_rows(episodes, [name])
        assert len(kept) == len(episodes) - len(bad)
        assert all(not FILTERS[name](e) for e in bad)
    kept = sft_rows(episodes, SFTDataConfig().filters)
    assert all(
        e.values["loss"] == 0 and e.values["format"] == 1
        for e in episodes
        if {"messages": e.messages} in kept
    )
    assert sft_rows(episodes, [lambda e: e.seed % 2 == 0]) == [
        {"messages": e.messages} for e in episodes if e.seed % 2 == 0
    ]


def test_filter_errors_are_clear(env):
    with pytest.raises(ValueError, match="unknown episode filter 'winners'"):
        resolve_filters(["winners"])
    with pytest.raises(ValueError, match="no episode of 4 passed"):
        sft_dataset(env, SFTDataConfig(teacher="random", num_episodes=4, filters=(lambda e: False,)))


def test_sft_trainer_learns_only_the_assistant_turns(env, tiny_model, tmp_path):
    from trl import SFTConfig, SFTTrainer

    from wander.training import trainer_spec

    from .conftest import cpu_args

    args = cpu_args(SFTConfig, str(tmp_path), max_steps=1, per_device_train_batch_size=4)
    trainer = env >> trainer_spec(SFTTrainer, tiny_model, args=args, data=SFTDataConfig(num_episodes=8))
    assert trainer.args.assistant_only_loss and not args.assistant_only_loss
    row = trainer.train_dataset[0]
    tokenizer = trainer.processing_class
    learned = [t for t, label in zip(row["input_ids"], row["labels"], strict=True) if label != -100]
    replies = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
    assert tokenizer.decode(learned) == "".join(r + "<|im_end|>" for r in replies)
    trainer.train()
    assert trainer.state.global_step == 1
