"""An environment for a subprocess in which importing the named top-level packages fails (as a
missing module would) and every attempt is recorded: the torch-free claims of infer and serve."""

from __future__ import annotations

import os
from pathlib import Path

# Installed as sitecustomize.py on the subprocess's PYTHONPATH, so it runs before anything else.
_GUARD = '''
import importlib.abc, os, sys

BLOCKED = os.environ["GUARD_BLOCK"].split(",")

class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            with open(os.environ["GUARD_LOG"], "a") as f:
                f.write(name + "\\n")
            raise ModuleNotFoundError(f"No module named {name!r}: it is blocked in this test", name=name)
        return None

sys.meta_path.insert(0, _Blocked())
'''

# The training side's packages: a runtime or serving process must import none of them.
TRAINING = "torch,datasets,sklearn,scipy,safetensors,matplotlib,onnx,onnxscript,onnx_ir,yaml"


def blocked_log(tmp_path: Path) -> Path:
    """The file each blocked import attempt is appended to (absent: none was attempted)."""
    return tmp_path / "blocked_imports.log"


def guarded_env(tmp_path: Path, blocked: str) -> dict[str, str]:
    """os.environ plus the guard: importing any package of `blocked` (comma-separated) fails."""
    guard = tmp_path / "guard"
    guard.mkdir(exist_ok=True)
    (guard / "sitecustomize.py").write_text(_GUARD, encoding="utf-8")
    return {**os.environ, "PYTHONPATH": str(guard), "GUARD_BLOCK": blocked, "GUARD_LOG": str(blocked_log(tmp_path))}
