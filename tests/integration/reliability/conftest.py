"""Fixtures of the reliability suite: ONE tiny trained and exported run per session, copied per
test (the helpers they use live in tests/kits/reliability_kit.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from kits.reliability_kit import TINY, Runner, make_data, stderr_of


@pytest.fixture(scope="session")
def trained(tmp_path_factory) -> Path:
    """The session's one tiny run (2 epochs, seconds), exported to model.onnx."""
    root = tmp_path_factory.mktemp("reliability")
    data = make_data(root / "data")
    runner = Runner(root, root / "home")
    run = root / "run"
    proc = runner.cli("train", *TINY, f"data.path={data}", f"run_dir={run}")
    assert proc.returncode == 0, stderr_of(proc)
    (root / "train.stderr").write_bytes(proc.stderr)
    proc = runner.cli("export", "--run", run, "--no-verify")  # verification: test_verify_report_is_printed_once
    assert proc.returncode == 0, stderr_of(proc)
    assert (run / "model.onnx").is_file()
    return run


@pytest.fixture
def runner(tmp_path) -> Runner:
    return Runner(tmp_path, tmp_path / "home")


@pytest.fixture
def run(trained, tmp_path) -> Path:
    """A private copy of the session's trained and exported run."""
    copy = tmp_path / "run"
    shutil.copytree(trained, copy)
    config = (copy / "config.yaml").read_text(encoding="utf-8")  # its run_dir must name the copy
    (copy / "config.yaml").write_text(config.replace(str(trained), str(copy)), encoding="utf-8")
    return copy


@pytest.fixture
def data(trained) -> Path:
    return trained.parent / "data"


@pytest.fixture
def small_disk(tmp_path):
    """A factory of small tmpfs mounts (root only, else the test is skipped): a real full disk.
    Used instead of patching the writer, so every writer's own reaction to ENOSPC is tested."""
    mounts: list[Path] = []

    def mount(kib: int) -> Path:
        folder = tmp_path / f"disk{len(mounts)}"
        folder.mkdir()
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k", "tmpfs", str(folder)],
                              capture_output=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({proc.stderr.decode().strip()}); needs root")
        mounts.append(folder)
        return folder

    yield mount
    for folder in mounts:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
