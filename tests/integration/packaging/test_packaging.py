"""The wheel: one top-level package (tfm_cls), with export/ and configs/ inside it, the console
script, every preset, the browser page, and a build setuptools has nothing to warn about."""

from __future__ import annotations

import ast
import configparser
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def wheel(built_wheel) -> tuple[zipfile.ZipFile, str]:
    """(the built wheel, the build's output): conftest.built_wheel, once a session."""
    with zipfile.ZipFile(built_wheel.path) as zf:
        yield zf, built_wheel.output


def test_the_only_top_level_package_is_tfm_cls(wheel):
    zf, _ = wheel
    tops = {name.split("/")[0] for name in zf.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"tfm_cls"}  # no generic `export` or `configs` in site-packages
    top_level = next(n for n in zf.namelist() if n.endswith(".dist-info/top_level.txt"))
    assert zf.read(top_level).decode().split() == ["tfm_cls"]


def test_export_and_every_preset_are_inside_the_package(wheel):
    zf, _ = wheel
    names = set(zf.namelist())
    exported = {f"tfm_cls/export/{p.name}" for p in (ROOT / "export").glob("*.py")}
    assert "tfm_cls/export/infer.py" in exported and exported <= names
    presets = {f"tfm_cls/configs/{p.relative_to(ROOT / 'configs').as_posix()}" for p in (ROOT / "configs").glob("**/*.yaml")}
    assert "tfm_cls/configs/cls/bbc.yaml" in presets and presets <= names
    library = {f"{p.relative_to(ROOT).as_posix()}" for p in (ROOT / "tfm_cls").glob("**/*.py")}
    assert library <= names


def test_the_console_script(wheel):
    zf, _ = wheel
    entry_points = next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))
    parser = configparser.ConfigParser()
    parser.read_string(zf.read(entry_points).decode())
    assert dict(parser["console_scripts"]) == {"tfm-cls": "tfm_cls.cli:main"}


def test_setuptools_has_nothing_to_warn_about(wheel):
    """Its warnings come in `!!` blocks: a deprecated pyproject field, or a configs/ folder that
    pyproject.toml's `packages` list lacks (every folder of presets must be listed there)."""
    _, output = wheel
    warnings = [line.strip() for line in output.splitlines() if "Warning:" in line]
    assert "!!" not in output, "setuptools warned:\n" + "\n".join(warnings)


# Distribution names whose import name differs.
IMPORTS_AS = {"scikit-learn": "sklearn", "pyyaml": "yaml", "onnx-ir": "onnx_ir", "huggingface-hub": "huggingface_hub",
              "prometheus-client": "prometheus_client"}
# The torch-free install (the base dependencies) runs these; tfm_cls/serve/ adds the serve extra.
RUNTIME_MODULES = ("tfm_cls/runtime/*.py", "export/infer.py", "tfm_cls/errors.py", "tfm_cls/io.py", "tfm_cls/__init__.py",
                   "export/__init__.py", "tfm_cls/web_export.py", "tfm_cls/cli/web.py")
SERVE_MODULES = ("tfm_cls/serve/*.py",)
# `tfm-cls batch` and the Ray Data predictor (in the runtime package, but for the ray extra).
RAY_MODULES = ("tfm_cls/runtime/ray_predictor.py", "tfm_cls/batch/*.py")


def _project() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _importable(requirements: list[str]) -> set[str]:
    names = {_requirement_name(d) for d in requirements if not _requirement_name(d).startswith("tfm-cls")}
    return {IMPORTS_AS.get(n, n.replace("-", "_")) for n in names}


def _third_party_imports(paths) -> dict[str, str]:
    """{top-level module: the first file importing it} of every import in `paths` (in functions too)."""
    found: dict[str, str] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                found.setdefault(module.split(".")[0], str(path.relative_to(ROOT)))
    return {m: where for m, where in found.items() if m not in sys.stdlib_module_names and m != "tfm_cls"}


def test_every_third_party_import_is_a_declared_dependency():
    """Each module tfm_cls/ or export/ imports is the standard library's, ours, or declared in
    pyproject.toml (a dependency or an extra)."""
    project = _project()
    declared = project["dependencies"] + [d for extra in project["optional-dependencies"].values() for d in extra]
    third_party = _third_party_imports([*(ROOT / "tfm_cls").glob("**/*.py"), *(ROOT / "export").glob("*.py")])
    assert {"torch", "onnx_ir", "onnxruntime", "tokenizers"} <= set(third_party)  # the scan sees imports
    undeclared = {m: where for m, where in third_party.items() if m not in _importable(declared)}
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"


def test_the_base_install_is_the_torch_free_runtime():
    """The base dependencies hold no training library; torch and the rest are the `train` extra,
    the web stack the `serve` extra, and `dev` installs both."""
    project = _project()
    base = _importable(project["dependencies"])
    extras = project["optional-dependencies"]
    assert base == {"numpy", "onnxruntime", "tokenizers", "tqdm"}
    assert {"torch", "onnx", "datasets", "sklearn", "safetensors"} <= _importable(extras["train"])
    assert _importable(extras["serve"]) == {"starlette", "uvicorn", "prometheus_client", "uvloop", "httptools"}
    dev = " ".join(extras["dev"])
    assert "train" in dev and "serve" in dev


@pytest.mark.parametrize("patterns, extras", [(RUNTIME_MODULES, ()), (SERVE_MODULES, ("serve",)),
                                              (RAY_MODULES, ("ray",))], ids=["runtime", "serve", "ray"])
def test_the_torch_free_modules_import_only_what_their_install_holds(patterns, extras):
    """`tfm-cls infer` and `tfm-cls serve` run on the base install (+ serve): their modules may
    import nothing of the `train` extra, at the top or inside a function."""
    project = _project()
    allowed = _importable(project["dependencies"] + [d for e in extras for d in project["optional-dependencies"][e]])
    paths = sorted({p for pattern in patterns for p in ROOT.glob(pattern)})
    if not extras:  # the ray extra's module in the runtime package is checked with its extra
        paths = [p for p in paths if str(p.relative_to(ROOT)) not in RAY_MODULES]
    assert paths
    imported = _third_party_imports(paths)
    outside = {m: where for m, where in imported.items() if m not in allowed}
    assert not outside, f"torch-free modules import what their install lacks: {outside}"


def _requirement_name(requirement: str) -> str:
    name = requirement
    for stop in "<>=!~[; ":
        name = name.split(stop)[0]
    return name.strip().lower().replace("_", "-")
