"""wander.core.atomic_io with real processes: what a writer killed mid-write leaves is cleared by the next writer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from wander.core.atomic_io import TEMP_NAME, atomic_dir, clean_leftovers, write_text

ROOT = Path(__file__).resolve().parents[3]


def killed_writer(code: str, *args: str) -> None:
    """Run `code` in a child that SIGKILLs itself where it says `die()`: no cleanup of any kind runs."""
    prelude = (
        "import os, signal, sys\nfrom pathlib import Path\ndef die(): os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def leftovers(folder: Path) -> list[str]:
    """The writers' temporaries in `folder`."""
    return sorted(p.name for p in folder.iterdir() if TEMP_NAME.fullmatch(p.name))


def test_a_folder_write_killed_midway_is_cleared_by_the_next_write(tmp_path: Path) -> None:
    model = tmp_path / "model"
    killed_writer(
        """
        from wander.core.atomic_io import atomic_dir
        with atomic_dir(sys.argv[1]) as tmp:
            (tmp / "weights").write_bytes(b"\\0" * 4096)
            die()
        """,
        str(model),
    )
    assert not model.exists() and len(leftovers(tmp_path)) == 1  # model-sized debris
    with atomic_dir(model) as tmp:
        (tmp / "weights").write_bytes(b"new")
    assert (model / "weights").read_bytes() == b"new" and leftovers(tmp_path) == []


def test_a_file_write_killed_midway_is_cleared_by_the_next_write(tmp_path: Path) -> None:
    target = tmp_path / "metrics.json"
    killed_writer(
        """
        from wander.core.atomic_io import write_atomic
        write_atomic(sys.argv[1], lambda tmp: (tmp.write_text("{"), die()))
        """,
        str(target),
    )
    assert len(leftovers(tmp_path)) == 1
    write_text(target, "{}")
    assert target.read_text() == "{}" and leftovers(tmp_path) == []


def test_a_swap_killed_between_its_renames_gets_the_previous_output_back(tmp_path: Path) -> None:
    model = tmp_path / "model"
    with atomic_dir(model) as tmp:
        (tmp / "weights").write_bytes(b"old")
    # replace_dir's first rename done (the output moved aside), its second not: no `model` at all.
    killed_writer(
        """
        import wander.core.atomic_io as io
        target = Path(sys.argv[1])
        new = io._tmp_name(target, "tmp")
        new.mkdir()
        (new / "weights").write_bytes(b"half-way")
        target.rename(io._tmp_name(target, "old"))
        die()
        """,
        str(model),
    )
    assert not model.exists() and len(leftovers(tmp_path)) == 2
    removed = clean_leftovers(model)
    assert (model / "weights").read_bytes() == b"old"  # what readers saw before the swap began
    assert len(removed) == 1 and leftovers(tmp_path) == []


def test_a_live_writers_temporary_is_left_alone(tmp_path: Path) -> None:
    model = tmp_path / "model"
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom wander.core.atomic_io import atomic_dir\n"
            "with atomic_dir(sys.argv[1]) as tmp:\n    print(tmp, flush=True)\n    time.sleep(60)\n",
            str(model),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        busy = Path(writer.stdout.readline().strip())
        with atomic_dir(model) as tmp:
            (tmp / "weights").write_bytes(b"mine")
        assert busy.is_dir()  # another process still writes there
        assert leftovers(tmp_path) == [busy.name]
    finally:
        writer.kill()
        writer.wait()
        writer.stdout.close()
    assert os.path.isdir(model)
