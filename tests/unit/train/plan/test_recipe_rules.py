"""The recipe's choices (tfm_cls.train.plan) on small synthetic folders: the task type read from the label
column, the regime from the counts, the refusals of data that cannot be trained on, and a config
that loads and says why."""

import json
import random

import pytest
from kits.tiny_topics import CLASSES, make_texts, write_dataset

from tfm_cls.errors import ConfigError, DataError
from tfm_cls.train.plan import plan_run, profile_data
from tfm_cls.train.plan import rules as rules_module


def _overrides(plan) -> dict[str, str]:
    return dict(item.split("=", 1) for item in plan.overrides)


def _named(rows):
    return [{"text": r["text"], "label": CLASSES[r["label"]]} for r in rows]


def test_eight_examples_per_class_take_the_contrastive_recipe_and_keep_every_example(tmp_path):
    folder = write_dataset(tmp_path / "few", {"train": _named(make_texts(24, 0)), "test": _named(make_texts(30, 1))})
    plan = plan_run(profile_data(folder))
    chosen = _overrides(plan)
    assert plan.regime == "few_shot"
    assert plan.profile.task == "single_label" and plan.profile.per_label["median"] == 8
    assert chosen["contrastive.iterations"] == "20" and chosen["model.normalize"] == "true"
    assert chosen["data.validation_fraction"] == "0"  # no class is left with one or two examples to train on
    assert "data.test_fraction" not in chosen  # a test file was given: it is the test split
    cfg = plan.config()
    assert cfg.contrastive.iterations == 20 and cfg.model.normalize and cfg.data.validation_fraction == 0
    assert cfg.name == "few" and cfg.data.path == str(folder)
    assert any("contrastive" in line for line in plan.describe())  # the reason is given with the choice
    # a long text is read whole (its windows' logits averaged), whatever the few training texts' lengths
    assert cfg.inference.chunk is True and cfg.inference.aggregate == "mean"
    assert cfg.inference.aggregate_scores == "logits"  # the mean the head was fitted for (example_vectors)


def test_few_labels_in_a_script_the_encoder_cannot_read_ship_the_bag_unless_the_encoder_beats_it(tmp_path):
    rng = random.Random(0)
    characters = [chr(0x1200 + i) for i in range(90)]  # Ethiopic: [UNK] to the packaged MiniLM's vocabulary
    rows = [{"text": " ".join("".join(rng.choice(characters[c * 30:(c + 1) * 30]) for _ in range(4)) for _ in range(5)),
             "label": c} for c in range(3) for _ in range(8)]
    plan = plan_run(profile_data(write_dataset(tmp_path / "am", {"train": rows})))
    assert plan.regime == "few_shot" and plan.profile.unk_share > 0.5
    cfg = plan.config()
    assert cfg.tokenizer.extend_vocab and cfg.contrastive.prefer_bag
    assert any("no lower bound" in line for line in plan.describe())
    english = plan_run(profile_data(write_dataset(tmp_path / "en", {"train": _named(make_texts(24, 0))}))).config()
    assert english.contrastive.iterations == 20 and not english.contrastive.ship_bag
    assert not english.contrastive.prefer_bag


def test_few_labelled_label_lists_are_not_read_as_windows(tmp_path):
    rows = [{"text": r["text"], "labels": [CLASSES[r["label"]]]} for r in make_texts(24, 0)]
    plan = plan_run(profile_data(write_dataset(tmp_path / "few_multi", {"train": rows})))
    cfg = plan.config()
    assert plan.regime == "few_shot" and cfg.data.task == "multi_label"
    assert cfg.inference.chunk is False  # chunked inference aggregates single-label scores only


def test_many_examples_take_the_fine_tuned_encoder_with_the_fitted_branch_and_a_step_zero_evaluation(tmp_path):
    folder = write_dataset(tmp_path / "many", {"train": make_texts(3000, 0), "validation": make_texts(300, 1)})
    plan = plan_run(profile_data(folder), minutes=10)
    cfg = plan.config()
    assert plan.regime == "standard"
    assert cfg.wide.enabled and cfg.wide.warm_start and cfg.train.eval_at_start is True
    assert cfg.contrastive.iterations == 0 and cfg.data.validation_fraction > 0
    assert 1 <= cfg.train.max_minutes < 10  # the budget less what the run spends outside the loop
    assert cfg.train.best_metric == "accuracy"


def test_label_lists_are_multi_label_and_only_well_attested_labels_get_their_own_threshold(tmp_path):
    rng = random.Random(0)
    rows = [{"text": r["text"], "labels": sorted({CLASSES[r["label"]], rng.choice(CLASSES)})}
            for r in make_texts(600, 0)]
    folder = write_dataset(tmp_path / "multi", {"train": rows})
    plan = plan_run(profile_data(folder))
    cfg = plan.config()
    assert plan.profile.task == "multi_label" and cfg.data.task == "multi_label"
    assert cfg.data.label_column == "labels"
    assert cfg.multi_label.thresholds == "per_label" and cfg.multi_label.min_positives == rules_module.MIN_VALIDATION_POSITIVES


def test_float_labels_are_regression_and_two_text_columns_are_pairs(tmp_path):
    rng = random.Random(0)
    rows = [{"sentence1": r["text"], "sentence2": r["text"][::-1], "score": round(rng.uniform(1, 5), 2)}
            for r in make_texts(200, 0)]
    plan = plan_run(profile_data(write_dataset(tmp_path / "pairs", {"train": rows})))
    cfg = plan.config()
    assert plan.regime == "regression" and cfg.data.task == "regression"
    assert cfg.data.text_columns == ["sentence1"] and cfg.data.text_pair_column == "sentence2"
    assert cfg.train.best_metric == "pearson" and not cfg.wide.enabled


def test_without_the_pretrained_encoder_the_recipe_trains_from_scratch(tmp_path, monkeypatch):
    monkeypatch.setattr(rules_module, "encoder_folder", lambda: None)
    folder = write_dataset(tmp_path / "d", {"train": make_texts(90, 0)})
    cfg = plan_run(profile_data(folder)).config()
    assert cfg.model.init_from is None and cfg.contrastive.iterations == 0


@pytest.mark.parametrize("rows, message", [
    ([{"text": f"text {i}", "label": "a"} for i in range(10)], "at least two classes"),
    ([{"text": " ", "label": i % 2} for i in range(10)], "every text in column 'text' is empty"),
    ([{"text": f"text {i}", "label": {"x": 1}} for i in range(10)], "holds mappings"),
    ([{"text": f"text {i}", "label": "a" if i < 9 else "b"} for i in range(10)], "single training example (b)"),
])
def test_data_that_cannot_be_trained_on_is_refused_naming_the_file(tmp_path, rows, message):
    folder = write_dataset(tmp_path / "bad", {"train": rows})
    with pytest.raises(DataError) as err:
        profile_data(folder)
    assert message in str(err.value) and str(folder / "train.jsonl") in str(err.value)


def test_a_folder_without_a_training_file_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x")
    with pytest.raises(DataError, match="no training file"):
        profile_data(tmp_path / "empty")


def test_labels_json_names_the_classes_in_order(tmp_path):
    folder = write_dataset(tmp_path / "ids", {"train": make_texts(60, 0)}, labels=CLASSES)
    assert profile_data(folder).labels == CLASSES
    (folder / "labels.json").write_text(json.dumps(["x"]))  # fewer names than the ids used
    with pytest.raises(DataError, match="labels.json"):
        profile_data(folder)


def test_a_class_too_rare_for_two_carves_gets_no_test_split_carved(tmp_path):
    rows = _named(make_texts(300, 0)) + [{"text": "a rare one", "label": "rare"}, {"text": "rare again", "label": "rare"}]
    cfg = plan_run(profile_data(write_dataset(tmp_path / "rare", {"train": rows}))).config()
    assert cfg.data.test_fraction == 0 and cfg.data.validation_fraction > 0


def test_a_labels_json_naming_a_label_twice_is_refused_naming_the_name(tmp_path):
    folder = write_dataset(tmp_path / "dup", {"train": make_texts(60, 0)}, labels=["animals", "food", "animals"])
    with pytest.raises(DataError, match=r"labels.json: the class name\(s\) animals appear more than once"):
        profile_data(folder)


def _planned_folders(root):
    rng = random.Random(0)
    return {
        "few_shot": write_dataset(root / "few", {"train": _named(make_texts(24, 0)), "test": _named(make_texts(30, 1))}),
        "standard": write_dataset(root / "many", {"train": make_texts(3000, 0), "validation": make_texts(300, 1)}),
        "multi_label": write_dataset(root / "multi", {"train": [
            {"text": r["text"], "labels": sorted({CLASSES[r["label"]], rng.choice(CLASSES)})} for r in make_texts(600, 0)]}),
        "regression": write_dataset(root / "pairs", {"train": [
            {"sentence1": r["text"], "sentence2": r["text"][::-1], "score": round(rng.uniform(1, 5), 2)}
            for r in make_texts(200, 0)]}),
        "long_documents": write_dataset(root / "long", {"train": [
            {"text": " ".join([r["text"]] * 40), "label": r["label"]} for r in make_texts(400, 0)]}),
    }


def test_the_plan_hands_over_typed_values_that_build_the_config_the_dotted_strings_did(tmp_path, monkeypatch):
    """Plan.config builds the ClassifierConfig from the typed settings (no string round trip); it is
    the config the same choices give written as dotted overrides and parsed again (the old path),
    with and without the user's KEY=VALUE overrides, which come last."""
    from tfm_cls.config import ClassifierConfig, load_config

    plans = [plan_run(profile_data(folder), minutes=minutes, threads=threads)
             for folder in _planned_folders(tmp_path).values() for minutes, threads in ((15, None), (5, 2))]
    monkeypatch.setattr(rules_module, "encoder_folder", lambda: None)
    plans.append(plan_run(profile_data(tmp_path / "many")))
    assert {plan.regime for plan in plans} == {"few_shot", "standard", "regression", "from_scratch"}
    extra = ["train.lr=3e-4", "seed=7"]
    for plan in plans:
        assert plan.config() == load_config(ClassifierConfig, None, plan.overrides)
        assert plan.config(extra) == load_config(ClassifierConfig, None, [*plan.overrides, *extra])
        assert plan.config(extra).train.lr == 3e-4
        assert isinstance(plan.settings["train.max_minutes"], float)
        # --explain names each value as the overrides write it, one line per decision
        assert all(any(o + ", " in line or o + ": " in line for line in plan.reasons) for o in plan.overrides)


def test_a_folder_name_yaml_would_misread_stays_the_run_name(tmp_path):
    """Typed values are never parsed: a folder named `2024` names the run "2024" (parsed as YAML,
    it was the number 2024, which a run name refuses)."""
    cfg = plan_run(profile_data(write_dataset(tmp_path / "2024", {"train": make_texts(300, 0)}))).config()
    assert cfg.name == "2024" and cfg.data.path == str(tmp_path / "2024")


def test_a_bad_user_override_names_only_itself(tmp_path):
    plan = plan_run(profile_data(write_dataset(tmp_path / "d", {"train": make_texts(300, 0)})))
    with pytest.raises(ConfigError, match=r"^command line train\.lr=fast: "):
        plan.config(["train.lr=fast"])


def test_text_read_character_by_character_gets_a_second_bag_of_triples_and_words_their_pieces_characters(tmp_path):
    rng = random.Random(0)
    characters = [chr(0x4E00 + i) for i in range(300)]  # CJK ideographs: one token each
    rows = [{"text": "".join(rng.choice(characters[c * 100:(c + 1) * 100]) for _ in range(12)), "label": c}
            for c in range(3) for _ in range(1000)]
    chinese = plan_run(profile_data(write_dataset(tmp_path / "zh", {"train": rows})), minutes=10)
    assert chinese.regime == "standard" and chinese.profile.chars_per_token == pytest.approx(1.0)
    wide = chinese.config().wide
    # the warm start's bag stays the word bag (pairs in 2^18 rows); the triples are a candidate of their own
    assert (wide.ngrams, wide.buckets, wide.second_bag_ngrams, wide.second_bag_buckets) == (2, 2**18, 3, 2**20)
    assert any("characters a token" in line for line in chinese.describe()) and not wide.char_grams
    english = plan_run(profile_data(write_dataset(tmp_path / "en", {"train": make_texts(3000, 0)})), minutes=10)
    assert english.profile.chars_per_token > 2.5
    assert (english.config().wide.ngrams, english.config().wide.second_bag_ngrams) == (2, 0)
    # word pieces: each token's character grams join the bag (a character is one token in Chinese: nothing to add)
    assert english.config().wide.char_grams and any("character 2-5-grams" in line for line in english.describe())
    # the table stays under BAG_TABLE_FLOATS: fewer rows for many outputs, never under the word bag's
    assert rules_module.character_bag(15) == (3, 2**20)
    assert rules_module.character_bag(28) == (3, 2**19)
    assert rules_module.character_bag(90) == (3, 2**18)


def test_long_documents_get_no_character_view_and_short_texts_of_the_same_words_do(tmp_path):
    # the same word pieces, as short texts and as documents of ~400 tokens (p95 past LONG_TEXT_TOKENS)
    short = make_texts(600, 0)
    rng = random.Random(0)
    documents = [{"text": " ".join(row["text"] for row in rng.sample(short, 40)), "label": label}
                 for label in range(len(CLASSES)) for _ in range(150)]
    long_plan = plan_run(profile_data(write_dataset(tmp_path / "long", {"train": documents})), minutes=10)
    assert long_plan.profile.lengths["p95"] > rules_module.LONG_TEXT_TOKENS
    wide = long_plan.config().wide
    assert wide.encoder_length == rules_module.ENCODER_LENGTH and not wide.char_grams
    assert any("no character view" in line for line in long_plan.describe())
    short_plan = plan_run(profile_data(write_dataset(tmp_path / "short", {"train": short})), minutes=10)
    assert short_plan.config().wide.char_grams
