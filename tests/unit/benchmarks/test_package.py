"""benchmarks/ as one package: every benchmark module imports and answers --help without the
network or the shared data folders, no file edits sys.path or imports another benchmark module,
and `python -m benchmarks` (`make bench`) lists every module with its purpose."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import benchmark_modules, main, purpose

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "benchmarks"
SHARED = (ROOT.parent / "shared").resolve()

# Run in a fresh interpreter, so that every module's import-time code runs under the audit hook.
_PROBE = r"""
import contextlib, importlib, io, json, os, sys

shared, names = sys.argv[1], sys.argv[2:]
touched = []
NETWORK = {"socket.connect", "socket.getaddrinfo", "socket.gethostbyname", "socket.sendto", "urllib.Request"}
FILES = {"open", "os.listdir", "os.scandir", "glob.glob", "os.chdir"}


def hook(event, args):
    if event in NETWORK:
        touched.append(f"{event} {args!r:.200}")
    elif event in FILES and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.path.abspath(os.fsdecode(args[0]))
        if path == shared or path.startswith(shared + os.sep):
            touched.append(f"{event} {path}")


sys.addaudithook(hook)
helped = {}
for name in names:
    module = importlib.import_module(f"benchmarks.{name}")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            module.main(["--help"])
            code = "returned"
        except SystemExit as exit:
            code = exit.code
    helped[name] = {"code": code, "usage": out.getvalue().startswith("usage:")}
print(json.dumps({"touched": touched, "helped": helped}))
"""


def _python_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_benchmark_module_imports_and_answers_help_without_network_or_shared_data():
    names = benchmark_modules()
    assert {"accuracy", "inference", "serving", "front", "distillation", "many_labels", "long_documents", "report",
            "ray_batch", "model_speed"} <= set(names)
    done = subprocess.run([sys.executable, "-c", _PROBE, str(SHARED), *names], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["touched"] == []
    assert result["helped"] == {name: {"code": 0, "usage": True} for name in names}


def _imports(tree: ast.AST, path: Path) -> list[str]:
    """Every module a file imports, as dotted names (relative imports resolved inside benchmarks/)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found += [base] + [f"{base}.{alias.name}" for alias in node.names]
    return found


@pytest.mark.parametrize("path", _python_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_file_edits_sys_path_or_imports_another_benchmark(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name):
            assert node.value.id != "sys", f"{path.name}:{node.lineno} touches sys.path"
        if isinstance(node, ast.Call):
            called = getattr(node.func, "attr", getattr(node.func, "id", ""))
            assert called not in ("spec_from_file_location", "run_path", "addsitedir"), \
                f"{path.name}:{node.lineno} loads code by path ({called})"
    benchmarks = set(benchmark_modules())
    this = path.stem if path.parent == PACKAGE else None
    for name in _imports(tree, path):
        parts = name.split(".")
        assert parts[0] not in benchmarks, f"{path.name} imports the benchmark {parts[0]} as a script"
        if parts[0] == "benchmarks" and len(parts) > 1 and parts[1] in benchmarks:
            assert parts[1] == this, f"{path.name} imports the benchmark module {parts[1]}"


def test_make_bench_lists_every_module_with_its_purpose(capsys):
    assert main() == 0
    out = capsys.readouterr().out
    for name in benchmark_modules():
        line = next(line for line in out.splitlines() if f"python -m benchmarks.{name} " in line)
        assert purpose(name) and line.rstrip().endswith(purpose(name))
    assert "harness" not in out and "peers" not in out
