"""The GPU check (bench/gpu_check.py) up to where it needs CUDA: its refusals, its wheel unpacking, and its pack.

The pack is built by its make target (PyPI reached, the packaged chat model converted: ~30 s); its wheels are then
unpacked by the check's own `install` into a Python that sees only torch, transformers, peft, accelerate, numpy,
pandas, pyarrow, pytest and their dependencies (this venv's copies, linked), where the check's stack must import and
its first steps run. The training itself runs on a GPU machine (docs/benchmarks.md#gpu-check).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bench.gpu_check import WHEELS, Clock, install, refusal

ROOT = Path(__file__).resolve().parents[2]
MACHINE = ("torch", "transformers", "peft", "accelerate", "numpy", "pandas", "pyarrow", "pytest")
"""What the GPU machine is said to have (with their dependencies); the pack brings the rest."""
THERE_ANYWAY = {
    "transformers",
    "peft",
    "accelerate",
    "typing-extensions",
}  # in the pack too, for newer versions
MODULES_BEFORE_CUDA = {"trl", "datasets", "transformers", "peft", "accelerate", "pydantic", "wander", "tasks"}
NO_CUDA = "no CUDA device (torch.cuda.is_available() is False)"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the check would run")
def test_a_machine_without_cuda_is_refused_in_one_line_before_the_stack_is_imported(tmp_path) -> None:
    plain = subprocess.run(
        [sys.executable, "bench/gpu_check.py"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert plain.returncode == 2
    assert (plain.stdout + plain.stderr).splitlines() == [
        f"gpu_check: {NO_CUDA}: run it on a machine with an NVIDIA GPU"
    ]
    seen = tmp_path / "modules.json"
    code = (
        "import atexit, json, runpy, sys\n"
        f"atexit.register(lambda: open({str(seen)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
        f"sys.argv = ['bench/gpu_check.py', '--pack', {str(tmp_path / 'nowhere')!r}]\n"
        "runpy.run_path('bench/gpu_check.py', run_name='__main__')\n"
    )
    wrapped = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert wrapped.returncode == 2
    assert len((wrapped.stdout + wrapped.stderr).splitlines()) == 1
    imported = {name.split(".")[0] for name in json.loads(seen.read_text())}
    assert "torch" in imported
    assert not imported & MODULES_BEFORE_CUDA


def test_a_missing_pack_is_refused_in_one_line_naming_its_make_target(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    message = refusal(tmp_path / "nowhere")
    assert message is not None and "\n" not in message
    assert f"no pack at {tmp_path / 'nowhere'}: run `make gpu-check-pack`" in message
    (tmp_path / "pack.json").write_text("{}")
    assert refusal(tmp_path) is None


def fake_wheel(folder: Path, name: str, version: str, value: int) -> None:
    """A wheel of one module `name` holding VALUE, with its dist-info."""
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as archive:
        archive.writestr(f"{name}/__init__.py", f"VALUE = {value}\n")
        archive.writestr(
            f"{name}-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        )


def test_install_unpacks_the_missing_and_the_older_distributions_only(tmp_path, monkeypatch) -> None:
    installed = tmp_path / "installed"
    (installed / "gpucheck_old-1.0.dist-info").mkdir(parents=True)
    (installed / "gpucheck_old-1.0.dist-info" / "METADATA").write_text("Name: gpucheck_old\nVersion: 1.0\n")
    wheels = tmp_path / "wheels"
    fake_wheel(wheels, "gpucheck_new", "1.0", 1)
    fake_wheel(wheels, "gpucheck_old", "2.0", 2)
    fake_wheel(wheels, "packaging", "0.1", 3)  # older than the one here: left packed
    monkeypatch.setattr(sys, "path", [str(installed), *sys.path])
    monkeypatch.delenv("PYTHONPATH", raising=False)
    site = tmp_path / "site-packages"
    assert install(wheels, site) == ["gpucheck_new==1.0", "gpucheck_old==2.0"]
    assert sys.path[0] == str(site) and os.environ["PYTHONPATH"] == str(site)
    assert not (site / "packaging").exists()
    assert importlib.metadata.version("gpucheck_old") == "2.0"
    import gpucheck_new

    assert gpucheck_new.VALUE == 1
    sys.modules.pop("gpucheck_new")


def test_the_clock_times_the_steps_after_the_warm_up() -> None:
    clock = Clock("sft", 3)
    clock.ends, clock.tokens = [0.0, 5.0, 6.0, 8.0], [0, 100, 300, 500]
    assert clock.figures() == {
        "timed_steps": 2,
        "s_per_step": 1.5,
        "tokens_per_s": 133.3,
        "tokens_per_step": 200.0,
        "warmup_step_s": 5.0,
    }
    assert clock.on_train_begin(None, None, None) is None  # any other trainer event: nothing
    with pytest.raises(AttributeError):
        clock.missing  # noqa: B018
    clock.ends, clock.tokens = [0.0, 5.0], [0, 100]
    with pytest.raises(RuntimeError, match="a warm-up and a timed step are needed"):
        clock.figures()


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A pack built by `make gpu-check-pack` (PyPI reached), and what the target printed."""
    folder = tmp_path_factory.mktemp("gpu-check") / "pack"
    done = subprocess.run(
        ["make", "--no-print-directory", "gpu-check-pack", f"GPU_CHECK_PACK={folder}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return folder, done.stdout


@pytest.mark.slow
def test_the_pack_holds_every_wheel_at_this_venvs_version_for_python_312_within_60_mib(pack) -> None:
    folder, printed = pack
    mib = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20
    assert mib <= 60
    assert f"{mib:.1f} MiB" in printed
    wheels = sorted((folder / "wheels").glob("*.whl"))
    found = {canonicalize_name(w.name.split("-")[0]): w.name.split("-")[1] for w in wheels}
    assert found == {canonicalize_name(n): importlib.metadata.version(n) for n in WHEELS}
    for wheel in wheels:
        python, abi, platform = wheel.name[: -len(".whl")].split("-")[-3:]
        assert python in ("py3", "py312", "cp312"), wheel.name
        assert platform == "any" or ("manylinux" in platform and platform.endswith("x86_64")), wheel.name
    manifest = json.loads((folder / "pack.json").read_text())
    assert manifest["model"] == "smollm2-135m-instruct" and "random" in manifest["weights"]


@pytest.mark.slow
def test_the_pack_holds_the_chat_models_config_and_its_tokenizer_marked_for_assistant_only_loss(pack) -> None:
    from transformers import AutoConfig, AutoTokenizer

    model = pack[0] / "model"
    names = {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}
    assert names <= {f.name for f in model.iterdir()}
    assert not list(model.glob("*.safetensors"))  # no weights travel
    config = AutoConfig.from_pretrained(model)
    assert (config.model_type, config.num_hidden_layers, config.hidden_size) == (
        "llama",
        30,
        576,
    )  # SmolLM2-135M
    assert "{% generation %}" in AutoTokenizer.from_pretrained(model).chat_template


def closure(roots: tuple[str, ...]) -> set[str]:
    """The distributions `roots` need here, themselves included (their requirements without extras)."""
    seen: set[str] = set()
    todo = [canonicalize_name(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for line in importlib.metadata.distribution(name).requires or []:
            need = Requirement(line)
            if need.marker is None or need.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(need.name))
    return seen


def link(names: set[str], site: Path) -> None:
    """This venv's installed files of distributions `names`, linked into `site` by their top-level entries."""
    site.mkdir(parents=True)
    for name in names:
        dist = importlib.metadata.distribution(name)
        for top in {f.parts[0] for f in dist.files or []} - {"..", "__pycache__"}:
            source = Path(dist.locate_file(top))
            if source.exists() and not top.endswith(".pth") and not (site / top).exists():
                (site / top).symlink_to(source)


@pytest.mark.slow
def test_the_packs_wheels_on_torch_and_transformers_alone_import_the_checks_stack(pack, tmp_path) -> None:
    absent = {canonicalize_name(n) for n in WHEELS} - THERE_ANYWAY
    base, standin = tmp_path / "base" / "site-packages", tmp_path / "standin" / "site-packages"
    link(closure(MACHINE) - absent, base)
    # Wheels built for Python 3.12 alone do not load here (3.11): this venv's copies of the same versions stand in,
    # so `install` leaves them packed and unpacks the others.
    wheels = pack[0] / "wheels"
    builds = {
        canonicalize_name(w.name.split("-")[0]) for w in wheels.glob("*.whl") if "-py3-none-any" not in w.name
    }
    link(builds, standin)
    code = f"""
import os, sys
from pathlib import Path
sys.path[:0] = [{str(standin)!r}, {str(base)!r}, {str(ROOT)!r}]
import torch  # the check's CUDA test, first
from bench import gpu_check
print("unpacked", gpu_check.install(Path({str(wheels)!r}), Path({str(tmp_path / "site-packages")!r})))
os.environ["DISABLE_MLFLOW_INTEGRATION"] = "TRUE"
from trl import GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer
from tasks.params.load import load_params
from tasks.runtime.trainer_args import trainer_args
from wander import load_environment, trainer_spec
from wander.training import SFTDataConfig
from wander.training.curriculum import Curriculum
from wander.training.lora import lora_config, save_trained
from wander.training.sft_data import sft_dataset
params = load_params(gpu_check.PARAMS, profile=gpu_check.PROFILE)
rows = sft_dataset(load_environment(**params.env.kwargs()), SFTDataConfig(teacher="teacher", num_episodes=8))
trainer_args(SFTConfig, params.sft, output_dir={str(tmp_path / "sft")!r}, max_steps=1)
print("rows", len(rows))
"""
    python = str(Path(sys.executable).resolve())  # the venv's interpreter without its site-packages (-S)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": ""}
    done = subprocess.run(
        [python, "-S", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    unpacked = done.stdout.splitlines()[0]
    for name in ("trl", "datasets", "pydantic=="):
        assert name in unpacked
    assert done.stdout.splitlines()[-1].startswith("rows ")
