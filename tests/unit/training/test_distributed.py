"""tfm_cls.training.distributed: device choice, setup errors, and every collective helper in a 2-process gloo world."""

import json
import os

import pytest
import torch
import torch.multiprocessing as mp
from kits.ddp_tiny import free_port, helpers_worker

from tfm_cls.config import ConfigError
from tfm_cls.training import distributed as D


def test_single_process_helpers_return_their_input():
    env = D.setup("cpu")
    assert (env.rank, env.world_size, env.backend, env.is_main, env.distributed) == (0, 1, None, True, False)
    model = torch.nn.Linear(2, 2)
    assert D.wrap_model(model, env) is model
    assert D.on_main(env, lambda: 5) == 5
    with pytest.raises(ConfigError, match="raised as is"):
        D.on_main(env, lambda: (_ for _ in ()).throw(ConfigError("raised as is")))
    assert D.gather_scalars([1.0, 2.0], env).tolist() == [[1.0, 2.0]]
    D.teardown(env)  # nothing to destroy


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_a_config_error():
    with pytest.raises(ConfigError, match="train.device=cuda: CUDA is not available"):
        D.select_device("cuda")
    assert D.select_device("auto") == torch.device("cpu")


def test_an_unknown_device_is_a_config_error():
    with pytest.raises(ConfigError, match="train.device='gpu0': expected auto, cpu, cuda or cuda:N"):
        D.select_device("gpu0")


def test_world_size_without_a_rendezvous_says_to_use_torchrun(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    for var in ("MASTER_ADDR", "MASTER_PORT", "RANK"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(D.DistributedError, match="MASTER_ADDR, MASTER_PORT, RANK not set: start with torchrun"):
        D.setup("cpu")


def test_collective_helpers_and_the_error_path_in_two_processes(tmp_path, capfd):
    with pytest.raises(mp.ProcessRaisedException, match="planned failure on rank"):
        mp.spawn(helpers_worker, args=(2, free_port(), free_port(), str(tmp_path)), nprocs=2, join=True)
    assert "terminate called" not in capfd.readouterr().err
    assert "WORLD_SIZE" not in os.environ  # the workers' environment stayed in the workers
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for rank, s in enumerate(seen):
        assert s["env"] == [rank, 2, "gloo", True, "cpu"]
        assert s["rows"] == [[100.0, 101.0, 102.0]]  # rank 0 gave no rows, rank 1 one row
        assert s["scalars"] == [[0.0, 0.0], [1.0, 10.0]]
        assert s["sum"] == [1.0, 2.0] and s["max"] == [1.0]
        assert s["object"] == {"from": 0} and s["all_objects"] == [0, 2]
        assert s["on_main"] == "computed by rank 0"
        assert s["on_main_error"] == ["ConfigError", "bad value on rank 0"]  # raised on every rank
        assert s["main_first_saw"] == "cache"  # rank 1 ran its block after rank 0's
        assert s["grad_synced"] == [[1.5, 1.5]]  # mean of rank 0's [1, 1] and rank 1's [2, 2]
        assert s["group_destroyed"]
    assert seen[0]["broadcast_weight"] == seen[1]["broadcast_weight"]
    assert seen[0]["grad_no_sync"] == [[1.0, 1.0]] and seen[1]["grad_no_sync"] == [[2.0, 2.0]]
