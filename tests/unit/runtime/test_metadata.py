"""tfm_cls.runtime.metadata: every key through one dataclass, and the contract the runtime and
the verifier hold a file to (metadata against graph, stale exports, unreadable values)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
from kits.export_testkit import LABELS, TEXTS
from tfm_cls.export import infer
from tfm_cls.export.verify import VerificationError, verify

from tfm_cls.errors import InferenceError, StaleExportError
from tfm_cls.runtime.metadata import FIELD_KEYS, KEYS, ExportMetadata
from tfm_cls.runtime.session import Classifier
from tfm_cls.runtime.text import LongText


def _props(path) -> dict[str, str]:
    return {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}


def _rewrite(src, dst, **changes: str | None):
    """A copy of `src` with metadata keys changed (None: removed)."""
    model = onnx.load(str(src))
    props = {**_props(src), **changes}
    onnx.helper.set_model_props(model, {k: v for k, v in props.items() if v is not None})
    onnx.save(model, str(dst))
    return dst


def _error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return lines[0]


@pytest.mark.parametrize("meta", [
    ExportMetadata(task="text-classification", labels=["a", "é"], max_length=16, model_config={"pad_token_id": 0}),
    ExportMetadata(task="multi-label-classification-pair", head="multi_label", text_pair=True, ensure_label=False,
                   thresholds=[0.25, 0.7], fixed_threshold=0.4, long_text=LongText(truncation="tail", stride=3)),
    ExportMetadata(task="multi-label-classification", head="multi_label", thresholds=None),
    ExportMetadata(task="seq2seq-decoder", bos_id=1, eos_id=2, encoder_file="encoder.onnx", opset=18,
                   fusions={}, quantization={"method": "dynamic"}, weights_sha256="ab" * 32),
])
def test_props_round_trip_through_the_dataclass(meta):
    props = meta.to_props()
    assert all(key in KEYS for key in props) and all(isinstance(v, str) for v in props.values())
    assert ExportMetadata.from_props(props) == meta
    assert ExportMetadata.from_props(props).to_props() == props


def test_every_key_is_one_field_and_every_field_one_key():
    fields = {f.name for f in ExportMetadata.__dataclass_fields__.values()}
    assert set(KEYS.values()) == fields and len(FIELD_KEYS) == len(KEYS)


def test_single_label_single_text_files_carry_no_head_keys():
    props = ExportMetadata(task="text-classification").to_props()
    assert not {"tfm_cls.head", "tfm_cls.thresholds", "tfm_cls.ensure_label", "tfm_cls.text_pair"} & set(props)


def test_the_temperature_round_trips_and_a_file_without_it_reads_as_one():
    from tfm_cls.runtime.heads import runtime_head

    meta = ExportMetadata(task="text-classification", temperature=0.731)
    props = meta.to_props()
    assert props["tfm_cls.temperature"] == "0.731"
    back = ExportMetadata.from_props(props)
    assert back.temperature == 0.731 and runtime_head(back).temperature == 0.731
    old = {k: v for k, v in props.items() if k != "tfm_cls.temperature"}  # an export before calibration
    assert ExportMetadata.from_props(old).temperature is None
    assert ExportMetadata.from_props(old).temperature_or_one == 1.0 == runtime_head(ExportMetadata.from_props(old)).temperature
    # an uncalibrated head writes no key: such files are what they were before calibration existed
    from tfm_cls.runtime.heads import SingleLabel

    assert "temperature" not in SingleLabel().metadata(False)
    assert SingleLabel(temperature=2.0).metadata(False) == {"temperature": 2.0}


@pytest.mark.parametrize("value", ["0", "-1.5", "null", "true", "\"warm\"", "NaN"])
def test_a_temperature_that_is_not_a_positive_number_is_refused(value):
    props = {**ExportMetadata(task="text-classification").to_props(), "tfm_cls.temperature": value}
    with pytest.raises(InferenceError, match="'tfm_cls.temperature' should be a positive number"):
        ExportMetadata.from_props(props, "m.onnx")


@pytest.mark.parametrize(("key", "value"), [("tfm_cls.max_length", "sixteen"), ("tfm_cls.labels", "[not json"),
                                            ("tfm_cls.long_text", "{")])
def test_an_unreadable_value_names_its_key(key, value):
    props = {**ExportMetadata(task="text-classification").to_props(), key: value}
    with pytest.raises(InferenceError, match=f"unreadable tfm_cls metadata {key!r}"):
        ExportMetadata.from_props(props, "m.onnx")


def test_a_file_that_is_not_ours_is_refused_with_the_key_named():
    with pytest.raises(InferenceError, match="is not a tfm_cls model: metadata 'tfm_cls.format'"):
        ExportMetadata.from_props({"producer": "someone else"}, "m.onnx")


def test_labels_shorter_than_the_output_are_one_error_exit_2(classifier_onnx, tmp_path, capsys):
    """Before: a numpy broadcasting traceback, exit 1."""
    bad = _rewrite(classifier_onnx, tmp_path / "short.onnx", **{"tfm_cls.labels": json.dumps(LABELS[:2])})
    src = tmp_path / "in.txt"
    src.write_text("\n".join(TEXTS[:3]) + "\n")
    assert infer.main(["--model", str(bad), "--input", str(src), "--no-progress"]) == 2
    line = _error_line(capsys)
    assert "does not fit the graph" in line and "3 outputs" in line and "2 labels" in line


def test_a_pair_task_on_a_single_text_graph_is_refused(classifier_onnx, tmp_path):
    bad = _rewrite(classifier_onnx, tmp_path / "pair.onnx", **{"tfm_cls.task": "text-classification-pair"})
    with pytest.raises(InferenceError, match="token_type_ids"):
        Classifier(str(bad))


def test_the_runtime_reads_the_head_from_the_metadata(classifier_onnx, tmp_path):
    """A file's thresholds are its decision rule: the same graph marked multi-label decides by them."""
    marked = _rewrite(classifier_onnx, tmp_path / "ml.onnx", **{
        "tfm_cls.task": "multi-label-classification", "tfm_cls.head": "multi_label",
        "tfm_cls.thresholds": json.dumps([0.0, 2.0, 2.0]), "tfm_cls.ensure_label": "false",
        "tfm_cls.fixed_threshold": "0.5"})
    clf = Classifier(str(marked))
    assert clf.head.task == "multi_label" and clf.thresholds.tolist() == [0.0, 2.0, 2.0]
    probs, _ = clf.predict_proba(TEXTS[:4])
    assert clf.decide(probs).tolist() == [[True, False, False]] * 4


def test_verify_round_trips_the_metadata(classifier, classifier_onnx, tmp_path):
    report = verify(classifier, classifier_onnx, ["CPUExecutionProvider"])
    assert any(c.name == "metadata" and c.status == "ok" for c in report.checks)
    # the same value written another way (JSON with spaces) is not what the dataclass writes
    respaced = _rewrite(classifier_onnx, tmp_path / "respaced.onnx",
                        **{"tfm_cls.labels": json.dumps(LABELS, indent=1)})
    with pytest.raises(VerificationError, match=r"\['tfm_cls.labels'\] do not round-trip"):
        verify(classifier, respaced, ["CPUExecutionProvider"])


def test_verify_refuses_an_export_of_other_weights(classifier, classifier_onnx, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "model.safetensors").write_bytes(b"the weights the run has now")
    stale = _rewrite(classifier_onnx, run / "model.onnx", **{"tfm_cls.weights_sha256": "0" * 64})
    with pytest.raises(StaleExportError, match="was exported from other weights"):
        verify(classifier, stale, ["CPUExecutionProvider"])
    with pytest.raises(InferenceError, match="was exported from other weights"):
        Classifier(str(stale))
    shutil.copy(classifier_onnx, run / "model.onnx")  # no digest: nothing can be told, so it runs
    assert np.isfinite(Classifier(str(run / "model.onnx")).predict_proba(TEXTS[:2])[0]).all()
