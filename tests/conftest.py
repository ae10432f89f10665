"""Test-wide setup: no network, every cache under a temporary folder (no writes elsewhere), and
tests/ on sys.path so that every test imports the shared helpers as `kits.X` (tests/kits/, e.g.
kits.tiny_topics) and the scripts beside the integration tests as `integration.<topic>.X`."""

import os
import sys
import tempfile
from pathlib import Path

import pytest

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

_CACHE = tempfile.mkdtemp(prefix="tfm_cls_test_cache_")
os.environ["HF_HOME"] = os.path.join(_CACHE, "hf")
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["MPLBACKEND"] = "Agg"
# The user's cache folder (suggest's ONNX encoder, exported once, ~15 s): a temporary one, shared by the
# workers of one xdist run (its run id) so the export happens once a run.
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")
os.environ["XDG_CACHE_HOME"] = (os.path.join(tempfile.gettempdir(), f"tfm_cls_test_xdg_{_RUN}") if _RUN
                                else os.path.join(_CACHE, "xdg"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test` runs `-n 2 --dist loadgroup`; here a group is a test folder (tests/unit/<x>,
    tests/integration/<topic>), so one worker runs all of a folder and its session fixtures (a
    trained run, a Ray cluster, a browser) are built once, not once per worker. An explicit
    `xdist_group` mark still names its own group. (xdist's own loadgroup reads the marks through
    `item._nodeid`, which pytest 9.2 no longer uses, so it would group nothing.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    # Folders in collection order (as a serial run takes them), not largest first: each worker then meets
    # its folders in the serial order, which some fixtures rely on (tests/integration/web's session-scoped
    # sync playwright keeps its event loop running in the worker, so a later `with sync_playwright()`
    # elsewhere fails), and the small unit folders come last, evening out the two workers' ends.
    config.option.loadscopereorder = False

    class FolderScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):
                return nodeid.split("@")[-1]
            parts = nodeid.split("::", 1)[0].split("/")
            return "/".join(parts[:3]) if len(parts) > 3 else "/".join(parts[:-1]) or nodeid

    return FolderScheduling(config, log)
