"""The restructured code trains exactly what the old code trained (bit for bit): the two old loops
(commit eb4fca3), and distillation, the task types and export / infer / predict / eval through the
command line (commit 8d7d802); see fingerprint.py."""

import json
from pathlib import Path

import pytest

from integration.behaviour.fingerprint import environment, fingerprints

RECORDED = json.loads((Path(__file__).parent / "fingerprints.json").read_text())


def test_tiny_runs_match_the_fingerprints_of_the_old_code(tmp_path):
    if environment() != RECORDED["environment"]:
        # Bits depend on torch's version and the CPU kernels it picks, not only on our code.
        pytest.skip(f"fingerprints recorded on {RECORDED['environment']}, this is {environment()}")
    got = fingerprints(tmp_path)
    for run, expected in RECORDED.items():
        assert got[run] == expected, f"{run}: {got[run]} != {expected}"
