"""The build_model stage: the base policy under data/models/base: a scratch tiny Llama, a packaged pretrained chat
model by short name (`smollm2-135m-instruct`, from its PyPI wheel), or any model folder or hub id, copied.

python -m tasks.build_model [--params params.yaml] [--profile smoke]
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

from tasks.params.sections import Params
from tasks.runtime.tracking import set_tags, write_metrics
from wander import load_environment
from wander.core.atomic_io import atomic_dir, write_json
from wander.policies import packaged_models, scratch_model

logger = logging.getLogger(__name__)
ORIGIN_FILE = "wander_model.json"  # where the model came from, read by lineage tags downstream
SCRATCH = "scratch"


def run(params: Params) -> dict:
    """Build or copy the base model into `layout.base_model` (atomically); return and write its metrics."""
    config, output_dir = params.build_model, params.layout.base_model
    start = time.monotonic()
    with atomic_dir(output_dir) as tmp:
        if config.model == SCRATCH:
            env = load_environment(**params.env.kwargs())
            logger.info("training a tokenizer on the %s corpus and building a scratch model", params.env.name)
            # The env's reply tags are whole tokens: the model then writes a reply in a few tokens.
            tags = getattr(env.parser, "tags", ())
            tokenizer = scratch_model.build_tokenizer(env.corpus(), config.scratch, tags)
            model = scratch_model.build_model(tokenizer, config.scratch)
            origin = {"model": SCRATCH, "env": params.env.kwargs(), "scratch": config.scratch.to_dict()}
            write_json(tmp / "scratch_model_config.json", config.scratch.to_dict())
        elif config.model in packaged_models.PACKAGED:
            logger.info("converting the packaged %s to a plain checkpoint", config.model)
            tokenizer, model = packaged_models.load_packaged(config.model)
            origin = packaged_models.packaged_origin(config.model)
        else:
            logger.info("copying %s", config.model)
            tokenizer = scratch_model.load_tokenizer(config.model)
            model = scratch_model.load_model(config.model, device="cpu")
            origin = {
                "model": config.model,
                "source": "path" if Path(config.model).exists() else "hub",
                "revision": getattr(model.config, "_commit_hash", None),
            }
        tokenizer.save_pretrained(tmp)
        model.save_pretrained(tmp)
        write_json(tmp / ORIGIN_FILE, origin)
        context = _context(model.config, tokenizer)
    metrics = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "context_length": context,
        "seconds": round(time.monotonic() - start, 2),
    }
    write_metrics(Path(params.layout.metrics) / "build_model.json", metrics)
    set_tags({"wander.model.source": config.model, "wander.model.dir": output_dir})
    logger.info("%s: %d parameters, vocabulary %d", output_dir, metrics["parameters"], len(tokenizer))
    return metrics


def _context(model_config: object, tokenizer: object) -> int:
    # Hub tokenizers often report a huge sentinel model_max_length; the position embeddings are the real limit.
    return int(getattr(model_config, "max_position_embeddings", None) or tokenizer.model_max_length)


if __name__ == "__main__":
    from tasks.runtime.stage import stage_main

    sys.exit(stage_main("build_model", run))
