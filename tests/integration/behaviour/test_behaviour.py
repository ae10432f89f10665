"""The restructured code trains exactly what the old code trained (bit for bit): the two old loops
(commit eb4fca3), and distillation, the task types and export / infer / predict / eval through the
command line (commit 8d7d802); see fingerprint.py. The house by job (issue 35) was checked the same
way: the fingerprints of the code before it, recorded on this machine, and after it are equal.

fingerprints.json holds one record per environment (torch, the CPU kernels it picks, numpy,
tokenizers: the last bits of a float depend on them); the test compares against the record of
this machine's environment (`make test-slow`, or pytest -m slow on this file) and is skipped
where none was recorded (`python
tests/integration/behaviour/fingerprint.py OUT.json` records one)."""

import json
from pathlib import Path

import pytest

from integration.behaviour.fingerprint import environment, fingerprints

RECORDS = json.loads((Path(__file__).parent / "fingerprints.json").read_text())["records"]


@pytest.mark.slow  # about a minute: `make test-slow`; run it on every change that may move a bit
def test_tiny_runs_match_the_fingerprints_of_the_old_code(tmp_path):
    here = environment()
    recorded = next((r for r in RECORDS if r["environment"] == here), None)
    if recorded is None:
        # Bits depend on torch's version and the CPU kernels it picks, not only on our code.
        pytest.skip(f"fingerprints recorded on {[r['environment'] for r in RECORDS]}, this is {here}")
    got = fingerprints(tmp_path)
    for run, expected in recorded.items():
        assert got[run] == expected, f"{run}: {got[run]} != {expected}"
