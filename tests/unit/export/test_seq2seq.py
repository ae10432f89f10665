"""Seq2SeqTransformer export: monolithic graph, split encoder/decoder, numpy greedy == torch greedy."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from tfm_cls.export import spec
from tfm_cls.export.greedy_decode import MonolithicGreedyDecoder, SplitGreedyDecoder
from tfm_cls.export.verify import verify


def test_three_files_each_self_contained(seq2seq_onnx):
    assert set(seq2seq_onnx) == {"seq2seq", "seq2seq-encoder", "seq2seq-decoder"}
    folder = seq2seq_onnx["seq2seq"].parent
    assert sorted(p.name for p in folder.iterdir()) == ["decoder.onnx", "encoder.onnx", "model.onnx"]


@pytest.mark.parametrize("task", ["seq2seq", "seq2seq-encoder", "seq2seq-decoder"])
def test_verify_each_graph(seq2seq, seq2seq_onnx, task):
    report = verify(seq2seq, seq2seq_onnx[task])
    statuses = {c.name: c.status for c in report.checks}
    assert statuses["values (CPU)"] == "ok"
    if task != "seq2seq-encoder":  # the monolithic and the split decoder also decode greedily
        assert statuses["greedy (CPU)"] == "ok"


def test_monolithic_graph_interface(seq2seq_onnx):
    graph = onnx.load(str(seq2seq_onnx["seq2seq"])).graph
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in graph.input}
    assert dims == {
        "src_ids": ["batch", "src_sequence"],
        "tgt_ids": ["batch", "tgt_sequence"],
        "src_attention_mask": ["batch", "src_sequence"],
        "tgt_attention_mask": ["batch", "tgt_sequence"],
    }
    (logits,) = graph.output
    assert logits.name == "logits" and logits.type.tensor_type.shape.dim[2].dim_value == 40


def _source(seed: int = 3):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([9, 5, 1, 7])
    mask = (torch.arange(9).unsqueeze(0) < lengths.unsqueeze(1)).long()  # [4, 9]
    ids = torch.randint(3, 50, (4, 9), generator=gen).masked_fill(mask == 0, 0)
    return ids, mask


def test_numpy_greedy_matches_torch_with_early_stops(seq2seq, seq2seq_onnx):
    src, mask = _source()
    free_run = seq2seq.greedy_decode(src, mask, max_len=10, bos_id=1, eos_id=39)
    # Make a token the first row emits early the end-of-sequence token, so rows finish at
    # different steps and the pad-after-eos rule is exercised.
    eos = int(free_run[0, 2])
    want = seq2seq.greedy_decode(src, mask, max_len=10, bos_id=1, eos_id=eos).numpy()
    assert (want == eos).any(axis=1).any()

    split = SplitGreedyDecoder(seq2seq_onnx["seq2seq-encoder"], seq2seq_onnx["seq2seq-decoder"])
    mono = MonolithicGreedyDecoder(seq2seq_onnx["seq2seq"])
    for decoder in (split, mono):
        got = decoder.greedy_decode(src.numpy(), mask.numpy(), max_len=10, bos_id=1, eos_id=eos)
        np.testing.assert_array_equal(got, want)


def test_greedy_max_len_one_returns_bos_only(seq2seq, seq2seq_onnx):
    src, mask = _source()
    split = SplitGreedyDecoder(seq2seq_onnx["seq2seq-encoder"], seq2seq_onnx["seq2seq-decoder"])
    got = split.greedy_decode(src.numpy(), mask.numpy(), max_len=1, bos_id=1, eos_id=2)
    want = seq2seq.greedy_decode(src, mask, max_len=1, bos_id=1, eos_id=2).numpy()
    np.testing.assert_array_equal(got, want)


def test_decoder_metadata_names_its_encoder(seq2seq_onnx):
    meta = {p.key: p.value for p in onnx.load(str(seq2seq_onnx["seq2seq-decoder"])).metadata_props}
    assert meta[spec.TASK_KEY] == "seq2seq-decoder"
    assert meta["tfm_cls.encoder_file"] == "encoder.onnx"
    assert (meta["tfm_cls.bos_id"], meta["tfm_cls.eos_id"]) == ("1", "2")


@pytest.mark.slow
def test_fused_seq2seq_graphs_verify(seq2seq, tmp_path):
    from tfm_cls.export.exporter import export_seq2seq

    paths = export_seq2seq(seq2seq, tmp_path, bos_id=1, eos_id=2, fuse=True)
    for path in paths.values():
        assert verify(seq2seq, path).ok
