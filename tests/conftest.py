"""Test-wide setup: no network, every cache under a temporary folder (no writes elsewhere), and
tests/ on sys.path so that every test imports the shared helpers as `kits.X` (tests/kits/, e.g.
kits.tiny_topics) and the scripts beside the integration tests as `integration.<topic>.X`."""

import os
import sys
import tempfile
from pathlib import Path

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

_CACHE = tempfile.mkdtemp(prefix="tfm_cls_test_cache_")
os.environ["HF_HOME"] = os.path.join(_CACHE, "hf")
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["MPLBACKEND"] = "Agg"
