"""The torch-free install, built for real: the wheel with its base + serve dependencies in a fresh
virtual environment (from the package index or the local pip cache), where torch is absent and
`tfm-cls infer` / `tfm-cls serve --help` run. Slow (minutes: it installs onnxruntime and the web
stack); the quick stand-in is test_serve_process.py's import guard. Prints both installs' sizes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SOURCES = ("tfm_cls", "export", "configs", "pyproject.toml", "README.md")


def _site_packages(python: Path | str) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout.strip())


def _size(path: Path) -> str:
    return subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True).stdout.split()[0]


@pytest.mark.slow
def test_the_torch_free_install_runs_infer_and_serve_without_torch(models, tmp_path):
    src = tmp_path / "src"
    for name in SOURCES:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(ROOT / name, src / name)
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist),
                    str(src)], check=True, timeout=300)
    (wheel,) = dist.glob("tfm_cls-*.whl")
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    py = env / "bin" / "python"
    proc = subprocess.run([str(py), "-m", "pip", "install", "-q", f"{wheel}[serve]"], capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    site = _site_packages(py)
    assert not (site / "torch").exists() and not list(site.glob("torch-*"))
    probe = subprocess.run([str(py), "-c", "import importlib.util as u; print(u.find_spec('torch'))"],
                           capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "None"
    cli = env / "bin" / "tfm-cls"
    out = subprocess.run([str(cli), "infer", "--model", str(models["single_label"]), "--no-progress"], input="a film\n",
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and '"label"' in out.stdout, out.stderr
    assert "--max-batch-tokens" in subprocess.run([str(cli), "serve", "--help"], capture_output=True, text=True,
                                                  timeout=60).stdout
    train = subprocess.run([str(cli), "train"], capture_output=True, text=True, timeout=60)
    assert train.returncode == 2 and "pip install 'tfm-cls[train]'" in train.stderr
    print(f"\ntorch-free install (base + serve): {_size(site)}; training install (this venv, dev): "
          f"{_size(_site_packages(sys.executable))}")
