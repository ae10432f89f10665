"""benchmarks/bag_terms.py: the library's own bag (MiniLM's tokens, the branch's hashed n-grams) at each
order, C picked on validation; the planner's vocabulary rule (characters read as [UNK] get tokens);
the table's count; sets it cannot compare are skipped."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from kits.tiny_topics import write_dataset

from benchmarks import bag_terms
from benchmarks.harness.tokens import run_tokenizer, tokenized
from tfm_cls.bag.fit import HINGE_C
from tfm_cls.bag.sparse import bag_matrix, set_idf
from tfm_cls.model.wide import WideBranch

# the class is the order of the same three words: single tokens say nothing, pairs and triples all
ORDERS = {0: "river stone cloud", 1: "stone cloud river", 2: "cloud river stone"}


def _rows(n_per_class: int) -> list[dict]:
    return [{"text": f"{ORDERS[c]} {ORDERS[c]}", "label": c} for _ in range(n_per_class) for c in ORDERS]


def test_each_order_is_scored_on_the_librarys_bag_and_a_pair_set_is_skipped(tmp_path, capsys):
    topics = write_dataset(tmp_path / "topics", {"train": _rows(200), "test": _rows(20)})
    pair_rows = lambda n: [{"sentence_a": "a b", "sentence_b": "c d", "label": i % 2} for i in range(n)]  # noqa: E731
    pairs = write_dataset(tmp_path / "pairs", {"train": pair_rows(20), "test": pair_rows(4)})
    row = bag_terms.measure(topics, [1, 2, 3], buckets=[4096])
    assert row["validation"] == 500 and row["train"] == 100 and row["buckets"] == {"1": 4096, "2": 4096, "3": 4096}
    assert all(row[f"ngrams_{n}"]["C"] in HINGE_C for n in (1, 2, 3))
    # the same words in every class: tokens alone cannot tell the classes apart, their order can
    assert row["ngrams_1"]["test"] < 0.5 and row["ngrams_2"]["test"] == 1.0 and row["ngrams_3"]["test"] == 1.0
    assert bag_terms.measure(pairs, [2]) is None
    # as the recipe's bag, it does not count MiniLM's [CLS] / [SEP] unless asked to
    assert row["skip_ids"] == [101, 102]
    assert bag_terms.measure(topics, [1], buckets=[4096], count_special_tokens=True)["skip_ids"] == []
    # the scalings at the chosen C: unscaled, it is LinearSVC's own decision, the row's own test score
    scaled = bag_terms.measure(topics, [2], buckets=[4096], scaling=True)["ngrams_2"]
    assert scaled["scaling"]["none"]["test"] == scaled["test"]
    assert set(scaled["scaling"]) == {"none", "in_sample", "out_of_fold"}
    assert bag_terms.main(["--data", str(topics), str(pairs), "--ngrams", "1", "3", "--buckets", "4096",
                           "--scaling", "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "pairs: not a single-label set of single texts; skipped" in printed
    assert "ngrams 3 (against 1) ahead on 1 of 1 sets" in printed
    assert "| topics | 3 |" in printed and "out-of-fold shift" in printed
    saved = json.loads(next((tmp_path / "out").glob("bag-terms-*.json")).read_text())
    assert saved["orders"] == ["1", "3"] and [r["set"] for r in saved["rows"]] == ["topics"]


def test_out_of_fold_the_last_order_leads_the_first_where_the_order_of_the_words_is_the_class(tmp_path, capsys):
    topics = write_dataset(tmp_path / "topics", {"train": _rows(250), "test": _rows(20)})  # 500 held out, 250 fit
    row = bag_terms.measure(topics, [1, 2], buckets=[1024, 4096], out_of_fold=True)
    assert row["buckets"] == {"1": 1024, "2": 4096}
    # every training text scored by a fit without it: tokens alone are chance, pairs are all right
    assert row["ngrams_1"]["out_of_fold"] < 0.5 and row["ngrams_2"]["out_of_fold"] == 1.0
    lead = row["lead"]
    assert lead["out_of_fold + validation"]["texts"] == 750 and lead["validation"]["texts"] == 500
    assert lead["test"]["texts"] == 60
    # the lead is the difference of the accuracies, on the folds and validation together
    both = (250 * row["ngrams_2"]["out_of_fold"] + 500 * row["ngrams_2"]["validation"]
            - 250 * row["ngrams_1"]["out_of_fold"] - 500 * row["ngrams_1"]["validation"]) / 750
    assert abs(lead["out_of_fold + validation"]["lead"] - both) < 1e-9
    assert abs(lead["test"]["lead"] - (row["ngrams_2"]["test"] - row["ngrams_1"]["test"])) < 1e-9
    assert bag_terms.main(["--data", str(topics), "--ngrams", "1", "2", "--buckets", "1024", "4096",
                           "--out-of-fold", "--out", str(tmp_path / "out")]) == 0
    assert "ngrams 2 minus ngrams 1" in capsys.readouterr().out


def test_characters_minilm_reads_as_unk_get_tokens_where_the_planner_extends_the_vocabulary(tmp_path):
    texts = ["ᚠᚢᚦ ᚨᚱᚲ"] * 10  # runes: not in MiniLM's vocabulary
    runes = write_dataset(tmp_path / "runes", {"train": [{"text": t, "label": i % 2} for i, t in enumerate(texts)]})
    tokenizer = run_tokenizer(runes, texts)
    ids = tokenizer.encode(texts[0], add_special_tokens=False).ids
    assert tokenizer.token_to_id("[UNK]") not in ids and len(set(ids)) == 6
    english = write_dataset(tmp_path / "en", {"train": [{"text": "plain english words", "label": i % 2}
                                                        for i in range(10)]})
    assert run_tokenizer(english, ["plain english words"] * 10).get_vocab_size() == 30522


def test_a_c_order_adds_each_tokens_character_grams_which_read_words_training_never_held(tmp_path, capsys):
    # the class is the ending (-ing or -ed) of words; the test's words are others: only their grams are known
    seen = ["walk", "talk", "sing", "read", "look", "call", "wash", "paint", "climb", "cook"]
    unseen = ["jump", "play", "kick", "watch", "help", "pull", "push", "fill", "rain", "visit"]
    rows = lambda verbs, n: [{"text": f"{verbs[i % len(verbs)]}{'ing' if i % 2 else 'ed'}", "label": i % 2}  # noqa: E731
                             for i in range(n)]
    endings = write_dataset(tmp_path / "endings", {"train": rows(seen, 600), "test": rows(unseen, 40)})
    row = bag_terms.measure(endings, ["2", "2c"], buckets=[4096])
    assert row["ngrams_2"]["test"] <= 0.6 and row["ngrams_2c"]["test"] >= 0.75  # chance, and most endings read
    assert bag_terms.main(["--data", str(endings), "--ngrams", "2", "2c", "--buckets", "4096",
                           "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "ngrams 2c (against 2) ahead on 1 of 1 sets" in printed
    # the lead on validation and test with its paired standard error, without the folds unless asked
    assert row["lead"]["test"]["texts"] == 40 and "out_of_fold + validation" not in row["lead"]
    assert abs(row["lead"]["test"]["lead"] - (row["ngrams_2c"]["test"] - row["ngrams_2"]["test"])) < 1e-9
    assert "ngrams 2c minus ngrams 2" in printed


def test_the_split_holds_each_texts_ids_unpadded_so_its_bag_is_the_texts_alone(tmp_path):
    # texts of different lengths encoded together: padded ids would count (pad, pad) pairs in the shorter ones
    texts = ["a short one", "a much longer text with many more words than the first one holds"]
    folder = write_dataset(tmp_path / "en", {"train": [{"text": t, "label": i % 2} for i, t in enumerate(texts * 5)]})
    tokenizer = run_tokenizer(folder, texts)
    split = tokenized(tokenizer, texts, np.array([0, 1]))
    assert [len(ids) for ids in split.input_ids] == [len(tokenizer.encode(t).ids) for t in texts]  # one text: no padding
    assert 0 not in split.input_ids[0] and list(split.lengths) == [len(ids) for ids in split.input_ids]
    branch = WideBranch(tokenizer.get_vocab_size(), 2, 0, "tfidf", 2, 4096)
    set_idf(branch, split)
    together = bag_matrix(branch, split).to_dense()
    alone = bag_matrix(branch, tokenized(tokenizer, texts[:1], np.array([0]))).to_dense()
    assert torch.equal(together[0], alone[0])
    assert float(together[0, branch.vocab_size]) == 0.0  # the bucket (pad, pad) hashes to holds nothing


def test_a_folder_without_its_test_split_is_one_usage_error(tmp_path, capsys):
    folder = write_dataset(tmp_path / "half", {"train": _rows(5)})
    with pytest.raises(SystemExit) as stopped:
        bag_terms.main(["--data", str(folder), "--out", str(tmp_path / "out")])
    assert stopped.value.code == 2
    assert f"--data {folder}: no test.jsonl" in capsys.readouterr().err and not (tmp_path / "out").exists()
