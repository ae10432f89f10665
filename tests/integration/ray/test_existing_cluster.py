"""`tfm-cls batch --address` on a cluster that already runs (`ray start --head`, on 127.0.0.1
only, its session files in a temporary folder): the rows `tfm-cls infer` writes. Slow (a cluster's start
and stop, ~30 s): `make test-slow`."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from kits import ray_kit as R
from kits import serve_kit as K

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_batch_on_a_running_cluster_gives_infer_rows(models, tmp_path):
    port = _free_port()
    # a cluster as a user starts it: none of the RAY_* settings (token auth) of this session's own
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_")}, "RAY_USAGE_STATS_ENABLED": "0"}
    ray = Path(sys.executable).with_name("ray")
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # Ray's socket paths must stay under 108 bytes
    head = subprocess.Popen(
        [str(ray), "start", "--head", "--block", f"--port={port}", "--num-cpus=1", "--node-ip-address=127.0.0.1",
         "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        src = R.write_jsonl(tmp_path / "in.jsonl", R.text_rows(K.TEXTS, None))
        deadline = time.monotonic() + 60
        while True:  # the head is up once `ray status` reaches it
            up = subprocess.run([str(ray), "status", f"--address=127.0.0.1:{port}"], capture_output=True, env=env)
            if up.returncode == 0 or time.monotonic() > deadline or head.poll() is not None:
                break
            time.sleep(1)
        assert up.returncode == 0, head.stderr.read().decode()[-2000:] if head.poll() is not None else up.stderr
        done = subprocess.run(
            [sys.executable, "-m", "tfm_cls.cli", "batch", "--address", f"127.0.0.1:{port}", "--model",
             str(models["single_label"]), "--input", str(src), "--output", str(tmp_path / "out"), "--no-progress",
             "--buffer-texts", "16"], capture_output=True, text=True, env=env, timeout=240)
        assert done.returncode == 0, done.stderr[-2000:]
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        got = R.read_output(tmp_path / "out")
        assert summary["rows"] == len(K.TEXTS) == len(got)
        assert R.mismatches(K.infer_rows(models["single_label"], K.TEXTS, None, tmp_path), got) == []
    finally:
        head.terminate()  # --block: the head's processes stop with it
        head.wait(timeout=60)
        shutil.rmtree(temp, ignore_errors=True)
