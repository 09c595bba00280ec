"""Configuration of the default policy: a tiny Llama with a byte-level BPE tokenizer trained locally."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class ScratchModelConfig:
    r"""
    Configuration for [`build_scratch_model`]: the tokenizer is trained on local texts, the model is a randomly
    initialised `LlamaForCausalLM`. Nothing is downloaded, so it works on a machine without a model hub. The special
    tokens (`<|im_start|>`, `<|im_end|>`, `<|pad|>`) are fixed by the ChatML chat template, so they are not fields.

    The defaults give ~1.2M parameters: big enough to learn tic-tac-toe from SFT + GRPO, small enough to train on
    two CPU cores.

    Parameters:
        > Parameters that control the tokenizer

        vocab_size (`int`, *optional*, defaults to `1024`):
            Target vocabulary size of the byte-level BPE, special tokens included. An upper bound: training stops
            earlier when no pair of tokens reaches `min_frequency`. Never below 256 + the special tokens, since every
            byte is in the vocabulary (so there is no unknown token).
        min_frequency (`int`, *optional*, defaults to `2`):
            Minimum count of a pair of tokens in the training texts for it to be merged.
        split_digits (`bool`, *optional*, defaults to `True`):
            Make every digit its own token. Otherwise BPE merges digit runs, and a list of legal moves such as
            `"0134"` becomes one opaque token a small model cannot read cell by cell.
        single_char_tokens (`str`, *optional*, defaults to `"XO./"`):
            Characters that are always a token of their own, never merged with a neighbour. The default holds the
            compact board's marks, empty cell and row separator: otherwise BPE merges fragments such as `"./..."`
            that straddle rows, and a small model has to learn which cells each fragment covers. Empty to disable.

        > Parameters that control the model

        hidden_size (`int`, *optional*, defaults to `128`):
            Width of the residual stream.
        num_hidden_layers (`int`, *optional*, defaults to `4`):
            Number of transformer blocks.
        num_attention_heads (`int`, *optional*, defaults to `4`):
            Number of query heads; `hidden_size` must divide by it.
        num_key_value_heads (`int`, *optional*, defaults to `4`):
            Number of key/value heads (grouped-query attention when smaller than `num_attention_heads`).
        intermediate_size (`int`, *optional*, defaults to `512`):
            Width of the SwiGLU MLP.
        max_position_embeddings (`int`, *optional*, defaults to `4096`):
            Longest context the rotary embeddings are set up for, and the tokenizer's `model_max_length`. A
            tic-tac-toe game is a few hundred tokens.
        tie_word_embeddings (`bool`, *optional*, defaults to `True`):
            Share the input embedding and the output head: saves `vocab_size * hidden_size` parameters.
        rope_theta (`float`, *optional*, defaults to `10000.0`):
            Base period of the rotary position embeddings.
        rms_norm_eps (`float`, *optional*, defaults to `1e-6`):
            Epsilon of the RMSNorm layers.
        initializer_range (`float`, *optional*, defaults to `0.02`):
            Standard deviation of the normal initialisation of the weights.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the weight initialisation; the same config and texts give the same model, bit for bit.
    """

    # Tokenizer
    vocab_size: int = 1024
    min_frequency: int = 2
    split_digits: bool = True
    single_char_tokens: str = "XO./"

    # Model
    hidden_size: int = 128
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 4
    intermediate_size: int = 512
    max_position_embeddings: int = 4096
    tie_word_embeddings: bool = True
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    initializer_range: float = 0.02
    seed: int = 0

    def __post_init__(self) -> None:
        if self.vocab_size < 256 + 3:
            raise ValueError(f"vocab_size ({self.vocab_size}) must hold the 256 bytes and 3 special tokens")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must divide by num_attention_heads ({self.num_attention_heads})"
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must divide by "
                f"num_key_value_heads ({self.num_key_value_heads})"
            )

    def to_dict(self) -> dict:
        """The config as a plain dict (for params files and MLflow)."""
        return asdict(self)
