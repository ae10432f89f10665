"""Which teacher layers a student cut from the teacher keeps, and the weights it takes."""

import pytest
import torch

from tfm_cls.config import load_config
from tfm_cls.distill import DistillConfig
from tfm_cls.distill.cut import cut_state_dict, cut_student, resolve_layers
from tfm_cls.errors import ConfigError
from tfm_cls.model import TransformerClassifier


@pytest.mark.parametrize(("spec", "depth", "kept"), [
    ([0, 2, 4], 6, [0, 2, 4]),
    ("first:3", 6, [0, 1, 2]),
    ("every_other", 6, [0, 2, 4]),
    ("every_other", 5, [0, 2, 4]),
    ("spread:3", 12, [3, 7, 11]),  # MiniLM-L3's layers of MiniLM-L12
    ("spread:3", 6, [1, 3, 5]),
    ("spread:2", 6, [2, 5]),
    ("spread:6", 6, [0, 1, 2, 3, 4, 5]),
    ("spread:4", 6, [0, 2, 3, 5]),
    ("first:1", 1, [0]),
])
def test_resolve_layers(spec, depth, kept):
    assert resolve_layers(spec, depth) == kept


@pytest.mark.parametrize(("spec", "message"), [
    ([0, 6], r"layer\(s\) \[6\] out of range; the teacher has 6 layers \(0..5\)"),
    ("first:7", "asks for 7 layers; the teacher has 6"),
    ("spread:9", "asks for 9 layers"),
])
def test_layers_beyond_the_teacher_are_a_config_error(spec, message):
    with pytest.raises(ConfigError, match=message):
        resolve_layers(spec, 6)


@pytest.mark.parametrize(("value", "message"), [
    ("[]", "the list is empty"),
    ("[0,0,2]", r"layer\(s\) \[0\] repeated"),
    ("[2,1]", "increasing order"),
    ("[-1,2]", "count from 0"),
    ("first:0", "keep at least one layer"),
    ("last:2", "expected a list of teacher layer indices or one of"),
    ("3", r"give the layers \(\[0, 2, 4\]\) or how to choose them \(first:3, spread:3"),
    ("[a]", "student.layers"),
])
def test_bad_layer_lists_fail_when_the_config_loads(value, message):
    with pytest.raises(ConfigError, match=message):
        load_config(DistillConfig, None, ["teacher.path=t", "student.tokenizer=teacher", f"student.layers={value}"])


def test_a_cut_student_needs_the_teachers_tokens_and_embeddings():
    with pytest.raises(ConfigError, match="set student.tokenizer: teacher"):
        load_config(DistillConfig, None, ["teacher.path=t", "student.layers=first:2"])
    with pytest.raises(ConfigError, match="keeps the teacher's embeddings as they are"):
        load_config(DistillConfig, None, ["teacher.path=t", "student.tokenizer=teacher", "student.layers=first:2",
                                          "student.embedding_init=teacher_pca"])


def _teacher(num_layers: int = 4, norm_first: bool = True) -> TransformerClassifier:
    torch.manual_seed(0)
    model = TransformerClassifier(vocab_size=50, num_classes=3, d_model=16, nhead=2, num_layers=num_layers,
                                  dim_feedforward=32, max_len=12, norm_first=norm_first)
    return model.eval()


def test_cut_state_dict_renumbers_the_kept_layers():
    state = _teacher().state_dict()
    cut = cut_state_dict(state, [1, 3])
    assert torch.equal(cut["encoder.layers.0.linear1.weight"], state["encoder.layers.1.linear1.weight"])
    assert torch.equal(cut["encoder.layers.1.norm2.bias"], state["encoder.layers.3.norm2.bias"])
    assert not any(k.startswith(("encoder.layers.2.", "encoder.layers.3.")) for k in cut)
    assert torch.equal(cut["head.weight"], state["head.weight"])
    assert torch.equal(cut["token_embedding.embedding.weight"], state["token_embedding.embedding.weight"])


@pytest.mark.parametrize("norm_first", [True, False])
def test_a_cut_student_runs_exactly_the_teachers_kept_layers(norm_first):
    teacher = _teacher(norm_first=norm_first)
    ids = torch.randint(1, 50, (3, 9))  # [B, T]
    mask = torch.ones_like(ids, dtype=torch.bool)
    mask[1, 6:] = False
    with torch.no_grad():
        full = cut_student(teacher.config, teacher.state_dict(), [0, 1, 2, 3]).eval()
        assert torch.equal(full(ids, mask), teacher(ids, mask))  # every layer kept: the teacher itself
        student = cut_student(teacher.config, teacher.state_dict(), [0, 3]).eval()
        # reference: the teacher with its middle layers taken out by hand
        teacher.encoder.layers = torch.nn.ModuleList([teacher.encoder.layers[0], teacher.encoder.layers[3]])
        teacher.encoder.num_layers = 2
        assert torch.equal(student(ids, mask), teacher(ids, mask))
    assert student.config["num_layers"] == 2 and student.config["d_model"] == 16


def test_compress_layers_argument_and_run_names():
    from tfm_cls.distill.compress import layers_tag, parse_layers

    assert parse_layers("3") == "first:3" and layers_tag("first:3") == "cut3"
    assert parse_layers("0,2,4") == [0, 2, 4] and layers_tag([0, 2, 4]) == "cut0-2-4"
    assert parse_layers("spread:3") == "spread:3" and layers_tag("spread:3") == "cut-spread3"
    assert layers_tag("every_other") == "cut-every_other"
    with pytest.raises(ConfigError, match="--layers 0,x"):
        parse_layers("0,x")
