"""LoRA through peft_config: the adapters train, and the merged plain checkpoint is the adapter model."""

from __future__ import annotations

import json

import pytest
import torch

from wander.training.lora import LORA_DEFAULTS, lora_config, save_trained

from .conftest import cpu_args


def test_lora_config_takes_loraconfig_fields_and_refuses_others():
    config = lora_config({"r": 4})
    assert (config.r, config.lora_alpha, config.task_type) == (4, LORA_DEFAULTS["lora_alpha"], "CAUSAL_LM")
    assert lora_config(None) is None
    with pytest.raises(ValueError, match=r"unknown LoraConfig field\(s\) \['rank'\]"):
        lora_config({"rank": 4})


def test_sft_with_lora_saves_a_plain_model_that_plays_like_the_adapter_model(env, sft_model, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer

    from wander.policies.transformers_policy import TransformersPolicy
    from wander.training import trainer_spec
    from wander.training.sft_data_config import SFTDataConfig

    args = cpu_args(
        SFTConfig, str(tmp_path / "run"), max_steps=4, per_device_train_batch_size=16, learning_rate=0.05
    )
    data = SFTDataConfig(teacher="minimax-0.2", num_episodes=64)
    lora = lora_config({"r": 4})
    trainer = env >> trainer_spec(SFTTrainer, model=sft_model, args=args, data=data, peft_config=lora)
    assert isinstance(trainer.model, PeftModel)
    trainer.train()
    adapter_model = trainer.model
    # Trained adapters move the output: the merge below has something to carry.
    assert any(p.abs().max() > 0 for n, p in adapter_model.named_parameters() if "lora_B" in n)
    ids = torch.tensor([trainer.processing_class.encode("<move>4</move> X.O/...")])
    adapter_model.eval()
    with torch.no_grad():
        adapter_logits = adapter_model(input_ids=ids).logits
        with adapter_model.disable_adapter():
            base_logits = adapter_model(input_ids=ids).logits
    assert (adapter_logits - base_logits).abs().max() > 1e-3
    adapter_results = env.curve_metrics(
        TransformersPolicy(adapter_model, trainer.processing_class, greedy=True)
    )

    save_trained(trainer, tmp_path / "merged")

    saved = sorted(p.name for p in (tmp_path / "merged").iterdir())
    assert "adapter_config.json" not in saved and "model.safetensors" in saved
    assert "peft" not in json.dumps(json.loads((tmp_path / "merged" / "config.json").read_text())).lower()
    plain = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32)
    assert not isinstance(plain, PeftModel)
    with torch.no_grad():
        assert torch.allclose(plain(input_ids=ids).logits, adapter_logits, atol=1e-5)
    assert (
        env.curve_metrics(TransformersPolicy(plain, trainer.processing_class, greedy=True)) == adapter_results
    )
