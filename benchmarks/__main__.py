"""`python -m benchmarks` (`make bench`): every benchmark module with the first line of its
docstring. The docstrings are read from the files, so listing imports nothing heavy."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = {"harness", "peers", "__main__"}
"""Not benchmarks: the shared pieces, the peers, this listing."""


def benchmark_modules() -> list[str]:
    """The names of the benchmark modules, sorted."""
    return sorted(m.name for m in pkgutil.iter_modules([str(HERE)]) if m.name not in SHARED and not m.ispkg)


def purpose(name: str) -> str:
    """The first line of a benchmark module's docstring."""
    doc = ast.get_docstring(ast.parse((HERE / f"{name}.py").read_text(encoding="utf-8"))) or ""
    return doc.splitlines()[0].strip() if doc else ""


def main() -> int:
    names = benchmark_modules()
    width = max(len(name) for name in names) + len("python -m benchmarks.")
    print("Benchmarks (run from the repository root; each has --help; results go to bench_results/):\n")
    for name in names:
        print(f"  {'python -m benchmarks.' + name:<{width}}  {purpose(name)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
