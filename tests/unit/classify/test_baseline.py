"""tfm_cls/baseline_features.py: the baselines' TF-IDF vectorizer keeps scikit-learn's word
tokens outside CJK scripts and makes each CJK character a token."""

import re

import pytest
from sklearn.feature_extraction.text import TfidfVectorizer

from tfm_cls.classify.baseline import TOKEN_PATTERN, tfidf_vectorizer

ENGLISH = [
    "Don't stop me now -- it's 4:30, isn't it?",
    "The café's naïve résumé cost $3.14 (or 42 euros); a b c.",
    "e-mail x_y __init__ a1 B2B Straße ÜBER déjà-vu",
    "I said: \"hello, world!\" ... and left at 10am.",
]


def test_english_vocabulary_is_the_default_patterns():
    ours = tfidf_vectorizer().fit(ENGLISH)
    default = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2)).fit(ENGLISH)
    assert ours.vocabulary_ == default.vocabulary_
    assert (ours.transform(ENGLISH) != default.transform(ENGLISH)).nnz == 0


@pytest.mark.parametrize("text", ENGLISH)
def test_english_tokens_are_the_default_patterns(text):
    assert re.findall(TOKEN_PATTERN, text) == re.findall(r"(?u)\b\w\w+\b", text)


def test_chinese_gives_characters_and_character_bigrams():
    vocabulary = set(tfidf_vectorizer().fit(["我爱北京。"]).vocabulary_)
    assert vocabulary == {"我", "爱", "北", "京", "我 爱", "爱 北", "北 京"}


def test_mixed_text_gives_words_and_characters():
    assert re.findall(TOKEN_PATTERN, "2018年去Moscow看World Cup") == [
        "2018", "年", "去", "Moscow", "看", "World", "Cup"]
    vocabulary = set(tfidf_vectorizer().fit(["hello世界 ok"]).vocabulary_)
    assert {"hello", "世", "界", "ok", "hello 世", "世 界", "界 ok"} == vocabulary


def test_kana_and_hangul_are_characters_punctuation_is_not():
    assert re.findall(TOKEN_PATTERN, "東京タワー・です 한국어") == [
        "東", "京", "タ", "ワ", "ー", "で", "す", "한", "국", "어"]


def test_overrides_replace_defaults():
    vectorizer = tfidf_vectorizer(ngram_range=(1, 1), min_df=2)
    assert vectorizer.ngram_range == (1, 1) and vectorizer.min_df == 2 and vectorizer.sublinear_tf
