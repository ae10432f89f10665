"""Where a benchmark's results go: `DIR/NAME[_quick].json` (everything measured) and `.md` (the
table printed), the `_quick` suffix for a --quick run, so a quick run never overwrites a full one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_results(out: str | Path, name: str, results: dict[str, Any], table: str, quick: bool = False) -> Path:
    """Write the JSON and the Markdown table of `name` under `out` (made if missing); returns the JSON's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{name}{'_quick' if quick else ''}"
    (out / f"{stem}.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / f"{stem}.md").write_text(table + "\n")
    return out / f"{stem}.json"
