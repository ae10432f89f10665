"""The wheel, built once a session from a copy of the sources (the build writes nothing into the
repository: no build/, no egg-info), with the browser page in it where web/dist is built from today's
sources (`make web-install`; else it is built here with npm, else the wheel goes without it and the
page's tests skip)."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# What the build reads.
SOURCES = ("tfm_cls", "export", "configs", "web", "pyproject.toml", "setup.py", "MANIFEST.in", "README.md")


@dataclasses.dataclass
class Built:
    path: Path
    output: str
    with_page: bool


def _setup_module():
    spec = importlib.util.spec_from_file_location("tfm_cls_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    source = (ROOT / "setup.py").read_text(encoding="utf-8").replace("\nsetup(cmdclass", "\n_ = dict(cmdclass")
    exec(compile(source, str(ROOT / "setup.py"), "exec"), module.__dict__)  # its helpers, without running setup()
    return module


def page_is_built() -> bool:
    """web/dist holds the bundle of today's web/ sources; built here (npm run build) where node_modules is."""
    setup = _setup_module()
    dist = ROOT / "web" / "dist"
    if setup.built_from_sources(dist):
        return True
    npm = shutil.which("npm")
    if npm is None or not (ROOT / "web" / "node_modules" / ".package-lock.json").is_file():
        return False
    subprocess.run([npm, "run", "build", "--prefix", str(ROOT / "web")], check=True, capture_output=True, timeout=300)
    return setup.built_from_sources(dist)


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory) -> Built:
    """No build isolation: the test must not need the network."""
    pytest.importorskip("setuptools", minversion="77", reason="the build needs setuptools>=77 installed")
    with_page = page_is_built()
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "node_modules")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, src / name)
    dist = tmp_path_factory.mktemp("dist")
    env = {**os.environ, **({} if with_page else {"TFM_CLS_WHEEL_WITHOUT_PAGE": "1"})}
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation", "-w", str(dist), str(src)],
        capture_output=True, text=True, timeout=600, env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (path,) = dist.glob("tfm_cls-*.whl")
    return Built(path, proc.stdout + proc.stderr, with_page)
