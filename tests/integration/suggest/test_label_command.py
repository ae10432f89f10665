"""`tfm-cls label` as a user runs it: a process that takes a free port, reads the pool, prints its
address, appends a label sent to it, and stops cleanly on Ctrl-C (SIGINT)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import httpx


def test_label_serves_appends_and_stops_on_ctrl_c(minilm, pool_file, data_dir):
    # minilm: the encoder is exported into this session's cache folder, which the process inherits
    proc = subprocess.Popen([sys.executable, "-m", "tfm_cls.cli", "label", "--pool", str(pool_file), "--data",
                             str(data_dir), "-n", "3", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stdout.readline()  # printed once the page is ready
        assert line.startswith("label at http://127.0.0.1:"), line + proc.stderr.read()
        url = line.split()[2]
        with httpx.Client(base_url=url, timeout=30) as client:
            state = client.get("api/state").json()
            assert len(state["suggestions"]) == 3 and state["labels"] == ["animals", "food", "sports"]
            text = state["suggestions"][0]["text"]
            assert client.post("api/label", json={"text": text, "label": "food"}).json()["added"] == 1
        rows = [json.loads(r) for r in (data_dir / "train.jsonl").read_text(encoding="utf-8").split("\n") if r]
        assert rows == [{"text": text, "label": "food"}]
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
