"""GPU check: the chat profile's SFT and GRPO in bf16 on one NVIDIA GPU, in one command (docs/benchmarks.md#gpu-check).

Here, where PyPI is reachable, `make gpu-check-pack` (`python -m bench.gpu_check pack DIR`) fills build/gpu-check/
with the wheels a machine with torch and little else lacks (cp312 manylinux, at .venv's versions) and the chat
model's config and tokenizer (under 60 MiB). There (Python 3.12, no internet), with that folder carried, from the
repository's root: `python3 bench/gpu_check.py --pack build/gpu-check`.

It refuses a machine without CUDA, then one without the pack, in one line (exit 2) before it imports anything but
torch. Then it unpacks the wheels the machine lacks (or has older) into a temporary folder first on sys.path, builds
the chat model's architecture with RANDOM seeded weights (the packaged ones are a 98 MB wheel that does not travel:
speed and memory are the architecture's, learning is not measured), and trains through the project's own code, each
phase with the profile's section through `trainer_args` (bf16 where CUDA has it): SFT as `env >>
trainer_spec(SFTTrainer, ...)` on the env teacher's decisions, then GRPO from the SFT model, the profile's first
curriculum stage built as the grpo stage builds it (its rollout and completion budget; no learning curve). Per
phase: s/step and tokens/s over the steps after a warm-up step (SFT: non-padding input tokens; GRPO: prompt +
completion tokens of the step's samples) and peak allocated GPU memory, printed as it goes and written as JSON
(`--out`: $OUT/gpu_check.json where OUT is set, else build/gpu_check.json) after each phase.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PARAMS = ROOT / "params.yaml"  # the profiles are merged onto it
PACK = ROOT / "build" / "gpu-check"
PACK_TARGET = "gpu-check-pack"  # the Makefile's target that fills PACK
PROFILE = "llm-gpu"  # the chat profile (params.llm.yaml) with a GPU's batches (params.llm-gpu.yaml)
LIMIT_MIB = 60
# What the check needs beyond torch and what such a machine has: TRL, datasets and theirs, pydantic (tasks.params)
# and its own; transformers at the project's pin (its trainer configs take `activation_checkpointing`, which
# 5.17's lack), peft and accelerate at theirs, typing-extensions for pydantic. tests/bench/test_gpu_check.py imports
# the check's stack from these on top of torch, transformers, peft, accelerate, numpy, pandas, pyarrow and theirs.
WHEELS = (
    *("trl", "datasets", "dill", "multiprocess", "xxhash"),
    *("pydantic", "pydantic-core", "annotated-types", "typing-inspection", "typing-extensions"),
    *("transformers", "peft", "accelerate"),
)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
RANDOM_WEIGHTS = "random (seeded) weights in the chat model's architecture: speed and memory, not learning"


def refusal(pack: Path) -> str | None:
    """Why this machine cannot run the check, in one line, or None; torch is the only package imported."""
    import torch

    if not torch.cuda.is_available():
        return "gpu_check: no CUDA device (torch.cuda.is_available() is False): run it on a machine with an NVIDIA GPU"
    if not (pack / "pack.json").is_file():
        return f"gpu_check: no pack at {pack}: run `make {PACK_TARGET}` where PyPI is reachable and carry build/gpu-check"
    return None


def build_pack(folder: Path, profile: str = PROFILE) -> dict[str, Any]:
    """Fill `folder` with the wheels (cp312, .venv's versions) and the profile's chat model config and tokenizer."""
    from importlib.metadata import version

    from tasks.params.load import load_params
    from wander.policies.packaged_models import PACKAGED, load_packaged

    model = load_params(PARAMS, profile=profile).build_model.model
    if model not in PACKAGED:
        raise SystemExit(f"gpu_check: profile {profile}'s model {model!r} is not one of {sorted(PACKAGED)}")
    shutil.rmtree(folder, ignore_errors=True)
    pins = [f"{name}=={version(name)}" for name in WHEELS]
    target = ["--python-version", "3.12", "--implementation", "cp", *(f"--platform={p}" for p in PLATFORMS)]
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", *target]
    subprocess.run([*pip, "-d", str(folder / "wheels"), *pins], check=True)
    tokenizer, weights = load_packaged(
        model
    )  # the chat template marked for assistant-only loss, as build_model's
    weights.config.save_pretrained(folder / "model")
    weights.generation_config.save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    manifest = {"profile": profile, "model": model, "weights": "none: " + RANDOM_WEIGHTS, "wheels": pins}
    (folder / "pack.json").write_text(json.dumps(manifest, indent=2) + "\n")
    mib = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20
    print(f"gpu_check: pack {folder}: {len(pins)} wheels, {model}'s config and tokenizer: {mib:.1f} MiB")
    if mib > LIMIT_MIB:
        raise SystemExit(f"gpu_check: the pack is {mib:.1f} MiB, over its {LIMIT_MIB} MiB")
    return {**manifest, "mib": round(mib, 1)}


def install(wheels: Path, site: Path) -> list[str]:
    """Unpack into `site` each wheel whose distribution is missing or older here; put `site` first on sys.path."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.version import Version  # transformers' dependency

    unpacked = []
    for wheel in sorted(wheels.glob("*.whl")):
        name, wanted = wheel.name.split("-")[:2]
        try:
            if Version(version(name)) >= Version(wanted):
                continue
        except PackageNotFoundError:
            pass
        with zipfile.ZipFile(wheel) as archive:  # a wheel holds its files as site-packages lays them out
            archive.extractall(site)  # a folder named site-packages: dill pickles its modules by reference
        unpacked.append(f"{name}=={wanted}")
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    if any(u.startswith("typing_extensions") for u in unpacked):
        sys.modules.pop("typing_extensions", None)  # torch loaded the older one: later imports take the new
    return unpacked


def random_model(pack: Path, folder: Path, seed: int) -> str:
    """A checkpoint folder of the pack's model architecture with seeded random weights, and its tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    shutil.copytree(pack / "model", folder)
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(folder)).save_pretrained(folder)
    return str(folder)


class Clock:
    """A trainer callback: each optimizer step's end and the tokens trained by then, printed as it goes."""

    def __init__(self, phase: str, steps: int) -> None:
        self.phase, self.steps = phase, steps
        self.ends: list[float] = [time.perf_counter()]  # [0]: the training's start
        self.tokens: list[int] = [0]

    def __getattr__(self, name: str) -> Any:
        """Every other trainer event: nothing to do."""
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        """Record the step once the GPU's queued work is done; print its seconds and tokens."""
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.ends.append(time.perf_counter())
        self.tokens.append(int(state.num_input_tokens_seen))
        seconds, tokens = self.ends[-1] - self.ends[-2], self.tokens[-1] - self.tokens[-2]
        print(
            f"gpu_check: {self.phase} step {state.global_step}/{self.steps}: {seconds:.2f} s, {tokens} tokens"
        )

    def figures(self) -> dict[str, Any]:
        """s/step and tokens/s over the steps after the first (the warm-up), and the warm-up's seconds."""
        timed = len(self.ends) - 2
        if timed < 1:
            raise RuntimeError(f"{self.phase} ran {timed + 1} step(s): a warm-up and a timed step are needed")
        seconds, tokens = self.ends[-1] - self.ends[1], self.tokens[-1] - self.tokens[1]
        return {
            "timed_steps": timed,
            "s_per_step": round(seconds / timed, 3),
            "tokens_per_s": round(tokens / seconds, 1),
            "tokens_per_step": round(tokens / timed, 1),
            "warmup_step_s": round(self.ends[1] - self.ends[0], 2),
        }


def train(trainer: Any, clock: Clock) -> dict[str, Any]:
    """Train with `clock` attached; its figures, the peak GPU memory, the precision and the batch."""
    import torch

    trainer.add_callback(clock)
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    clock.ends[0] = time.perf_counter()
    trainer.train()
    peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None
    return {
        **clock.figures(),
        "peak_memory_gib": None if peak is None else round(peak, 2),
        "bf16": bool(trainer.args.bf16),
        "weights_dtype": str(next(trainer.model.parameters()).dtype),
        "batch": [trainer.args.per_device_train_batch_size, trainer.args.gradient_accumulation_steps],
    }


def sft_phase(params: Any, model: str, work: Path, steps: int, games: int) -> dict[str, Any]:
    """SFT of `model`, a warm-up and `steps` steps on the env teacher's decisions; saved to work/sft."""
    from trl import SFTConfig, SFTTrainer

    from tasks.runtime.trainer_args import trainer_args
    from wander import load_environment, trainer_spec
    from wander.training import SFTDataConfig
    from wander.training.lora import lora_config, save_trained

    extra = {"max_steps": 1 + steps, "save_strategy": "no", "include_num_input_tokens_seen": "non_padding"}
    args = trainer_args(SFTConfig, params.sft, output_dir=str(work / "sft-run"), **extra)
    data, lora = SFTDataConfig(teacher="teacher", num_episodes=games), lora_config(params.sft.lora)
    spec = trainer_spec(SFTTrainer, model=model, args=args, data=data, peft_config=lora)
    trainer = load_environment(**params.env.kwargs()) >> spec
    figures = train(trainer, Clock("sft", 1 + steps))
    save_trained(trainer, work / "sft")
    return {"rows": len(trainer.train_dataset), **figures}


def grpo_phase(params: Any, model: str, work: Path, steps: int) -> dict[str, Any]:
    """GRPO of `model`, the profile's first curriculum stage, a warm-up and `steps` steps."""
    from trl import GRPOConfig, GRPOTrainer

    from tasks.runtime.trainer_args import trainer_args
    from wander import load_environment, trainer_spec
    from wander.training.curriculum import Curriculum
    from wander.training.lora import lora_config

    section, env = params.grpo, load_environment(**params.env.kwargs())
    first = next(iter(section.curriculum(section.env.get(params.env.name, {})).values()))
    rollout = section.rollout()
    budget = rollout.completion_budget(env, section.max_completion_length)
    section = section.model_copy(update={"max_completion_length": budget})
    args = trainer_args(GRPOConfig, section, output_dir=str(work / "grpo-run"), save_strategy="no")
    spec = trainer_spec(GRPOTrainer, args=args, rollout=rollout, peft_config=lora_config(section.lora))
    trainer = Curriculum([dataclasses.replace(first, max_steps=1 + steps)]).trainer(env, spec, 0, model=model)
    figures = train(trainer, Clock("grpo", 1 + steps))
    return {
        "stage": first.name,
        "samples_per_step": first.batch_size,
        "max_completion_length": budget,
        **figures,
    }


def machine() -> dict[str, Any]:
    """The GPU and the versions that run the check."""
    from importlib.metadata import version

    import torch

    gpu = torch.cuda.get_device_properties(0)
    return {
        "gpu": gpu.name,
        "gpu_memory_gib": round(gpu.total_memory / 2**30, 1),
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        **{
            name: version(name) for name in ("torch", "transformers", "trl", "peft", "accelerate", "datasets")
        },
    }


def check(args: argparse.Namespace) -> dict[str, Any]:
    """Unpack the wheels, build the random model, train SFT then GRPO; the report, written after each phase."""
    # The repository's mlflow/ folder (MLflow's store) passes for an installed mlflow: TRL would import it.
    os.environ["DISABLE_MLFLOW_INTEGRATION"] = "TRUE"
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_NO_ADVISORY_WARNINGS"):
        os.environ.setdefault(name, "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        work = Path(tmp)
        unpacked = install(args.pack / "wheels", work / "site-packages")
        from tasks.params.load import load_params

        params = load_params(PARAMS, profile=args.profile)
        report = {
            "profile": args.profile,
            "weights": RANDOM_WEIGHTS,
            **machine(),
            "unpacked_wheels": unpacked,
        }
        print(f"gpu_check: {report['gpu']}; unpacked {', '.join(unpacked) or 'no wheel'}; {RANDOM_WEIGHTS}")
        model = random_model(args.pack, work / "base", args.seed)
        report["setup_s"] = round(time.perf_counter() - start, 1)
        report["sft"] = sft_phase(params, model, work, args.sft_steps, args.sft_games)
        write(report, args.out)
        report["grpo"] = grpo_phase(params, str(work / "sft"), work, args.grpo_steps)
        report["total_s"] = round(time.perf_counter() - start, 1)
        write(report, args.out)
    return report


def write(report: dict[str, Any], out: Path) -> None:
    """The report as JSON at `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")


def summary(report: dict[str, Any]) -> str:
    """The machine, then each phase's s/step, tokens/s and peak memory, one line each."""
    versions = ", ".join(f"{n} {report[n]}" for n in ("torch", "transformers", "trl", "peft", "accelerate"))
    lines = [
        f"gpu_check: {report['gpu']} ({report['gpu_memory_gib']} GiB), CUDA {report['cuda']}, {versions}"
    ]
    for phase in ("sft", "grpo"):
        p = report[phase]
        lines.append(
            f"gpu_check: {phase}: {p['s_per_step']} s/step, {p['tokens_per_s']} tokens/s, peak {p['peak_memory_gib']}"
            f" GiB ({p['tokens_per_step']} tokens/step over {p['timed_steps']} steps after a {p['warmup_step_s']} s"
            f" warm-up; batch {p['batch'][0]} x {p['batch'][1]}, bf16 {p['bf16']}, weights {p['weights_dtype']})"
        )
    return "\n".join([*lines, f"gpu_check: {report['total_s']} s in all; weights: {report['weights']}"])


def main(argv: list[str] | None = None) -> int:
    """`pack [DIR]` fills a pack here; otherwise the check (exit 2 and one line where it cannot run)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["pack"]:
        build_pack(Path(argv[1]) if len(argv) > 1 else PACK)
        return 0
    parser = argparse.ArgumentParser(prog="gpu_check", description=__doc__.splitlines()[0])
    parser.add_argument("--pack", type=Path, default=PACK, help=f"the folder `make {PACK_TARGET}` filled")
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "build"
    parser.add_argument("--out", type=Path, default=out / "gpu_check.json")
    parser.add_argument("--profile", default=PROFILE)
    parser.add_argument("--sft-steps", type=int, default=20, help="timed SFT steps, after a warm-up step")
    parser.add_argument("--sft-games", type=int, default=600, help="teacher games the SFT rows come from")
    parser.add_argument("--grpo-steps", type=int, default=3, help="timed GRPO steps, after a warm-up step")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if (reason := refusal(args.pack)) is not None:
        print(reason)
        return 2
    print(summary(check(args)))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # run as a file: the project's packages, from the repository's root
    sys.exit(main())
