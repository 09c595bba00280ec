"""The sft stage tokenizes each distinct conversation once: the trainer gets the dataset TRL makes of every row."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from tasks.runtime.trainer_args import device_args
from tasks.sft import distinct_rows, repeat_rows, repeated_index


def _turn(board: str, move: int) -> list[dict]:
    return [
        {"role": "user", "content": f"{board}\nX"},
        {"role": "assistant", "content": f"<move>{move}</move>"},
    ]


def test_distinct_rows_keep_first_seen_order_and_every_position() -> None:
    a, b, c = _turn("012/345/678", 4), _turn("X12/345/678", 4), _turn("012/345/678", 0)
    distinct, index = distinct_rows([a, b, a, c, b, a])
    assert distinct == [a, b, c]
    assert index == [0, 1, 0, 2, 1, 0]
    assert [distinct[i] for i in index] == [a, b, a, c, b, a]


def test_min_example_repeats_top_up_the_rare_conversations_and_keep_the_common_ones() -> None:
    a, b, c = _turn("012/345/678", 4), _turn("X12/345/678", 4), _turn("012/345/678", 0)
    distinct, index = distinct_rows([a, b, a, c, b, a])  # an opening thrice, a late position once
    assert repeated_index(index, None) == index
    laid_out = [distinct[i] for i in repeated_index(index, 2)]
    assert laid_out[:6] == [a, b, a, c, b, a]  # the data as it is, then the copies it lacked
    assert sorted(map(str, laid_out[6:])) == [str(c)]
    assert Counter(map(str, (distinct[i] for i in repeated_index(index, 4)))) == {
        str(a): 4,
        str(b): 4,
        str(c): 4,
    }


def test_repeated_rows_are_the_dataset_trl_prepares_from_all_rows(tmp_path: Path, base_model: Path) -> None:
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    long_prompt = _turn("012/345/678 " * 20, 4)  # its prompt alone fills max_length: TRL drops the row
    rows = [_turn("012/345/678", 4), _turn("X12/345/678", 4), long_prompt, _turn("012/345/678", 4)]
    rows += [_turn("OX2/345/678", 6), long_prompt, _turn("X12/345/678", 4)]

    def prepared(dataset: Dataset) -> Dataset:
        args = device_args(
            SFTConfig, output_dir=str(tmp_path / "out"), assistant_only_loss=True, max_length=40
        )
        return SFTTrainer(model=str(base_model), args=args, train_dataset=dataset).train_dataset

    full = prepared(Dataset.from_list([{"messages": c} for c in rows]))
    distinct, index = distinct_rows(rows)
    once = repeat_rows(
        prepared(Dataset.from_list([{"messages": c, "row": i} for i, c in enumerate(distinct)])), index
    )
    assert len(full) == len(rows) - 2  # the two long rows
    assert once.column_names == full.column_names
    assert once[:] == full[:]


def test_bf16_is_off_by_default_null_follows_the_hardware_and_true_trains_in_autocast_on_cpu(
    tmp_path: Path, base_model: Path
) -> None:
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from tasks.params.load import load_params
    from tasks.runtime.trainer_args import trainer_args
    from wander.policies.precision import bf16_support

    sft = load_params(params={}).sft  # the default env's recipe fills the epochs and learning rate
    assert trainer_args(SFTConfig, sft, output_dir=str(tmp_path / "a")).bf16 is False  # float32 by default
    detected = bf16_support() is not None  # a CUDA GPU that has it, or a CPU with AVX-512 BF16 / AMX
    auto = sft.model_copy(update={"bf16": None})  # the chat profiles' setting
    assert trainer_args(SFTConfig, auto, output_dir=str(tmp_path)).bf16 is detected
    cpu_bf16 = sft.model_copy(update={"bf16": True, "max_length": 40})
    args = trainer_args(SFTConfig, cpu_bf16, output_dir=str(tmp_path / "b"), max_steps=2)
    assert args.bf16 is True
    rows = [_turn("012/345/678", 4), _turn("X12/345/678", 4), _turn("OX2/345/678", 6)]
    trainer = SFTTrainer(
        model=str(base_model), args=args, train_dataset=Dataset.from_list([{"messages": c} for c in rows])
    )
    result = trainer.train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))
    # Mixed precision: the trained weights stay float32, so the saved checkpoint loads like any other.
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}


def test_model_init_kwargs_load_the_trained_model_with_eager_attention_and_the_same_loss(
    tmp_path: Path, base_model: Path
) -> None:
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from tasks.params.load import load_params
    from tasks.runtime.trainer_args import trainer_args

    rows = [_turn("012/345/678", 4), _turn("X12/345/678", 4), _turn("OX2/345/678", 6)]
    losses = {}
    for kernel in ("eager", "sdpa"):
        section = {"model_init_kwargs": {"attn_implementation": kernel}, "max_length": 40}
        sft = load_params(params={"sft": section}).sft
        args = trainer_args(SFTConfig, sft, output_dir=str(tmp_path / kernel), max_steps=2)
        assert args.model_init_kwargs == {"attn_implementation": kernel}
        torch.manual_seed(0)
        trainer = SFTTrainer(
            model=str(base_model), args=args, train_dataset=Dataset.from_list([{"messages": c} for c in rows])
        )
        assert trainer.model.config._attn_implementation == kernel
        losses[kernel] = trainer.train().training_loss
    assert losses["eager"] == pytest.approx(losses["sdpa"], rel=1e-3)  # the same attention, another kernel
