"""The command line and the real server: `tfm-cls serve` where torch cannot be imported, its
one-line errors, and uvicorn on 127.0.0.1 (a free port) under a bounded load that is stopped by
SIGTERM (every request sent before it is answered) or, with two workers, has one SIGKILLed (the
other serves, the supervisor replaces it). Each loop is bounded in requests and seconds."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from kits.import_guard import TRAINING, blocked_log, guarded_env


def _env(tmp_path: Path, blocked: str = TRAINING) -> dict[str, str]:
    return guarded_env(tmp_path, blocked)


def _cli(*args, env=None, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfm_cls.cli", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def _one_error_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def test_serve_help_and_infer_import_no_training_library(models, tmp_path):
    env = _env(tmp_path)
    assert "--max-batch-tokens" in _cli("serve", "--help", env=env).stdout
    assert _cli("--help", env=env).returncode == 0
    proc = subprocess.run([sys.executable, "-m", "tfm_cls.cli", "infer", "--model", str(models["single_label"]),
                           "--no-progress"], input="a film\n", capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0 and '"label"' in proc.stdout, proc.stderr
    code = "import tfm_cls.serve.app, tfm_cls.serve.server, tfm_cls.serve.service"
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60).returncode == 0
    assert not blocked_log(tmp_path).exists(), blocked_log(tmp_path).read_text()


def test_training_without_the_training_install_is_one_line(tmp_path):
    line = _one_error_line(_cli("train", "--config", "bbc", env=_env(tmp_path)))
    assert "tfm-cls train needs the training install: pip install 'tfm-cls[train]'" in line


def test_serve_without_the_serve_extra_is_one_line(models, tmp_path):
    line = _one_error_line(_cli("serve", str(models["single_label"]), "--port", "0",
                                env=_env(tmp_path, "starlette,uvicorn")))
    assert "pip install 'tfm-cls[serve]'" in line


def test_bad_models_and_flags_are_one_line(models, tmp_path):
    assert "not found" in _one_error_line(_cli("serve", str(tmp_path / "none.onnx"), "--port", "0"))
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not onnx")
    assert "not a readable ONNX model" in _one_error_line(_cli("serve", str(junk), "--port", "0"))
    line = _one_error_line(_cli("serve", str(models["single_label"]), "--max-batch-size", "0", "--request-timeout", "0"))
    assert "--max-batch-size" in line and "--request-timeout" in line


def test_a_port_in_use_is_one_line_before_the_model_loads(models, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        # onnxruntime blocked: the address must be checked before anything opens the model
        env = guarded_env(tmp_path, "onnxruntime,torch")
        line = _one_error_line(_cli("serve", str(models["single_label"]), "--port", str(port), env=env))
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in line and "--port" in line
    assert not blocked_log(tmp_path).exists(), blocked_log(tmp_path).read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(model: Path, *flags: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tfm_cls.cli", "serve", str(model), "--port", str(port),
                             "--threads", "1", *flags], stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.1)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def test_sigterm_under_load_answers_every_request_sent_before_it(models, tmp_path):
    proc, url = _start(models["single_label"], "--graceful-timeout", "10", log=tmp_path / "server.log")
    try:
        sent_before: list[int] = []
        stopped = {"at": None}

        def client(n: int) -> list[tuple[float, int | str]]:
            out = []
            with httpx.Client(timeout=10) as c:
                for i in range(40):  # bounded: 40 requests a client
                    t = time.monotonic()
                    try:
                        r = c.post(url + "/predict", json={"inputs": f"the film {n} {i}"})
                        out.append((t, r.status_code))
                    except httpx.TransportError as err:
                        out.append((t, type(err).__name__))
                        break
                    if stopped["at"] is None and n == 0 and i == 10:
                        stopped["answered"] = [s for _, s in out]  # this client's 11, answered before it
                        stopped["at"] = time.monotonic()
                        proc.send_signal(signal.SIGTERM)
            return out

        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = [x for chunk in pool.map(client, range(4)) for x in chunk]
        assert proc.wait(20) == 0
        statuses = [s for _, s in results]
        assert all(s in (200, 503) or isinstance(s, str) for s in statuses), statuses  # no 5xx but draining's 503
        # nothing accepted was lost: the 11 answered before the signal, and every request sent well before it
        assert stopped["answered"] == [200] * 11, stopped["answered"]
        sent_before = [s for t, s in results if t < stopped["at"] - 0.05]
        assert all(s == 200 for s in sent_before), sent_before
        assert "draining" in (tmp_path / "server.log").read_text()
    finally:
        _stop(proc)


def _workers(parent: int) -> list[int]:
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return [int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


def test_a_killed_worker_is_replaced_while_the_other_serves(models, tmp_path):
    proc, url = _start(models["single_label"], "--workers", "2", log=tmp_path / "server.log")
    try:
        deadline = time.monotonic() + 30
        while len(_workers(proc.pid)) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        before = _workers(proc.pid)
        os.kill(before[0], signal.SIGKILL)
        answered, statuses = 0, set()
        with httpx.Client(timeout=5) as c:
            for i in range(50):  # bounded: 50 requests, at most 5 tries each
                for _ in range(5):  # a connection the dead worker held, or its replacement still loading (503)
                    try:
                        status = c.post(url + "/predict", json={"inputs": f"text {i}"},
                                        headers={"Connection": "close"}).status_code
                    except httpx.TransportError:
                        time.sleep(0.1)
                        continue
                    statuses.add(status)
                    if status == 200:
                        answered += 1
                        break
                    time.sleep(0.1)
        assert answered == 50 and statuses <= {200, 503}, statuses
        deadline = time.monotonic() + 30
        while not (len(_workers(proc.pid)) == 2 and before[0] not in _workers(proc.pid)):
            assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
            time.sleep(0.2)
        metrics = httpx.get(url + "/metrics", timeout=5).text
        assert "te_request_success_total" in metrics  # multiprocess mode: every worker's values
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        _stop(proc)
