"""The wheel carries the browser page: `tfm-cls web` / `export --web` then need no Node and no checkout.

Everything else is in pyproject.toml. At wheel build (not in an editable install, which reads web/dist
of the checkout), build_py copies web/dist into tfm_cls/web_dist, after building it from the pinned
lockfile (npm ci, npm run build) where web/dist/build.json does not record the digest of today's
web/package-lock.json, web/build.mjs, web/src and web/page. TFM_CLS_WHEEL_WITHOUT_PAGE=1 builds a
wheel without it (where no Node is at hand; `tfm-cls web` then says how to get the page)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

WEB = Path(__file__).resolve().parent / "web"
BUNDLE_FILES = ("index.html", "page.js", "tfm-cls-worker.js", "tfm-cls.js", "ort-wasm-simd-threaded.wasm", "build.json")
SKIP_ENV = "TFM_CLS_WHEEL_WITHOUT_PAGE"


def sources_digest(root: Path) -> str:
    """web/build.mjs's sourcesDigest: each source's path and bytes, in path order."""
    files = sorted(["package-lock.json", "build.mjs", *(f"{d}/{p.name}" for d in ("src", "page")
                                                       for p in (root / d).iterdir() if p.is_file())])
    digest = hashlib.sha256()
    for name in files:
        digest.update(f"{name}\0".encode())
        digest.update((root / name).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def built_from_sources(dist: Path) -> bool:
    try:
        recorded = json.loads((dist / "build.json").read_text(encoding="utf-8"))["sources_sha256"]
    except (OSError, ValueError, KeyError):
        return False
    return all((dist / n).is_file() for n in BUNDLE_FILES) and recorded == sources_digest(WEB)


def build_bundle() -> Path:
    """web/dist, as web/'s lockfile and sources make it (npm ci + npm run build where it is not)."""
    dist = WEB / "dist"
    if built_from_sources(dist):
        return dist
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit(f"error: the wheel carries the browser page, built from {WEB} with npm (Node 18+), which is "
                         f"not installed here; install Node, run `make web-install` first, or set {SKIP_ENV}=1 to build "
                         "a wheel without the page")
    installed = WEB / "node_modules" / ".package-lock.json"
    if not installed.is_file() or installed.stat().st_mtime < (WEB / "package-lock.json").stat().st_mtime:
        subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--prefix", str(WEB)], check=True)
    subprocess.run([npm, "run", "build", "--prefix", str(WEB)], check=True)
    if not built_from_sources(dist):
        raise SystemExit(f"error: npm run build did not write {dist} from today's sources")
    return dist


class BuildPyWithPage(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install reads web/dist of the checkout (tfm_cls.web_export.bundle_dir)
        if os.environ.get(SKIP_ENV) == "1":
            self.announce(f"{SKIP_ENV}=1: the wheel does not carry the browser page", level=3)
            return
        dist = build_bundle()
        target = Path(self.build_lib) / "tfm_cls" / "web_dist"
        target.mkdir(parents=True, exist_ok=True)
        for name in BUNDLE_FILES:
            shutil.copyfile(dist / name, target / name)


setup(cmdclass={"build_py": BuildPyWithPage})
