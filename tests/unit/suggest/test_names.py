"""labels.json's three shapes, and the zero-shot scores of prototypes."""

import json

import numpy as np
import pytest

from tfm_cls.errors import DataError
from tfm_cls.suggest.names import parse_labels, read_labels, zero_shot_proba


def test_a_list_an_index_map_and_descriptions():
    assert parse_labels(["neg", "pos"], "x").names == ["neg", "pos"]
    assert parse_labels({"pos": 1, "neg": 0}, "x").names == ["neg", "pos"]
    described = parse_labels({"neg": "a negative review", "pos": " "}, "x")
    assert described.names == ["neg", "pos"] and described.descriptions == ["a negative review", None]
    assert described.described and described.prompts() == ["a negative review", "pos"]
    assert parse_labels(["sci/tech", "big_one"], "x").prompts() == ["sci tech", "big one"]


@pytest.mark.parametrize("value", [[], {}, "neg", ["a", "a"], [1, 2], {"a": [1]}])
def test_bad_shapes_are_a_data_error_naming_the_file(value, tmp_path):
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(value))
    with pytest.raises(DataError, match="labels.json"):
        read_labels(path)


def test_the_training_side_reads_descriptions_as_names(tmp_path):
    from tfm_cls.data.targets import read_label_names

    path = tmp_path / "labels.json"
    path.write_text(json.dumps({"pos": "a positive review", "neg": "a negative review"}))  # file order, not sorted
    assert read_label_names(path) == ["pos", "neg"]


def test_zero_shot_is_a_softmax_over_cosines():
    protos = np.eye(3, 4, dtype=np.float32)
    v = np.array([[1, 0, 0, 0], [0, 0.6, 0.8, 0]], np.float32)
    p = zero_shot_proba(v, protos)
    assert p.shape == (2, 3) and np.allclose(p.sum(1), 1)
    assert p.argmax(1).tolist() == [0, 2]
