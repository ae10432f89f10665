"""Test-wide setup: no network, and every cache under a temporary folder (no writes elsewhere)."""

import os
import tempfile

_CACHE = tempfile.mkdtemp(prefix="tfm_cls_test_cache_")
os.environ["HF_HOME"] = os.path.join(_CACHE, "hf")
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["MPLBACKEND"] = "Agg"
