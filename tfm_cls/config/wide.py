"""The `wide:` section of a classifier's config: the bag-of-terms branch's settings, in one place.

    wide:
      enabled: true          # the branch (tfm_cls.model.wide.WideBranch), summed into the logits
      weighting: tfidf       # its bag
      ngrams: 2              # tokens and hashed pairs of adjacent tokens
      warm_start: true       # fitted before step 1 and kept (tfm_cls.bag.warm_start)

Torch-free, as every config section: tfm_cls/config/schema.py imports it, and a bad config is
reported before torch loads. It imports nothing of tfm_cls.config either (which imports it), so
its checks raise ValueError themselves (a ConfigError naming the file once loaded). The checks
that need other sections (the hinge loss's task type, the encoder's length against the
positions) are ClassifierConfig's.

The settings lived in `model:` and `train:` before (WIDE_RENAMES): files, overrides and the
config.yaml of older run directories still load, with one deprecation line (config/loader.py).
"""

from __future__ import annotations

import dataclasses
import typing

WIDE_RENAMES: dict[str, str | None] = {
    "model.wide": "wide.enabled",
    "model.encoder_length": "wide.encoder_length",
    "model.wide_weighting": "wide.weighting",
    "model.wide_ngrams": "wide.ngrams",
    "model.wide_buckets": "wide.buckets",
    "train.wide_lr": "wide.lr",
    "train.wide_warm_start": "wide.warm_start",
    "train.wide_loss": "wide.loss",
}
"""The branch's keys before it had a section (old dotted key -> new)."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclasses.dataclass(kw_only=True)
class WideConfig:
    """A bag-of-terms branch beside the encoder (docs/tasks.md, "Many rare labels")."""

    enabled: bool = False
    """A bag-of-tokens branch summed into the logits: one learned weight per (term, class), summed
    over the text's terms, each weighted by its share of an L2-normalised bag (`weighting`). A
    linear model of the words, as TF-IDF + a linear classifier is, beside the encoder: what rare
    labels given away by their words need, which a fine-tuned encoder learns slowly on a CPU budget.
    Adds vocab_size x classes parameters; exported with the model."""
    encoder_length: int | None = None
    """With the branch: the encoder reads only the first encoder_length tokens of each text, the
    branch all `tokenizer.max_length` of them: long documents get their words counted at the cost
    of a shorter encoder pass (attention grows with the square of the length); `tokenizer.max_length`
    may then pass `model.max_len`. null: the encoder reads every token."""
    weighting: typing.Literal["count", "tfidf"] = "count"
    """What a term adds to the bag. `count`: 1 / sqrt(the text's terms), an L2-normalised bag of
    one-hot terms. `tfidf`: scikit-learn's sublinear TF-IDF over the terms ((1 + log tf) * idf,
    L2-normalised), the idf from the training texts, stored with the model."""
    ngrams: int = 1
    """1, the bag counts tokens; 2, tokens and pairs of adjacent tokens, each pair hashed into one of
    `buckets` rows (fastText's hashed bigrams): the 1-2-gram features of a TF-IDF baseline, for
    buckets x classes more parameters; 3, also triples of adjacent tokens, hashed into the same rows."""
    buckets: int = 2**18
    """With `ngrams` 2 or 3: how many rows the pairs (and triples) are hashed into (2^18 was as good as 2^20 on
    many-label documents; fewer rows, more collisions)."""
    warm_start: bool = False
    """Before the first step, fit the branch (and the head's bias) as a linear model of the training
    texts' bags, full-batch L-BFGS with C picked on validation by `train.best_metric`
    (tfm_cls.bag.warm_start), then keep it fixed (`lr` unused): the encoder trains against the
    branch's out-of-fold logits and learns what the words miss (stacking). Training starts where
    TF-IDF + logistic regression ends."""
    loss: typing.Literal["head", "squared_hinge"] = "head"
    """With `warm_start`, the loss the branch is fitted with. `head`: the head's own (logistic
    regression of the bags). `squared_hinge` (multi-label): one-vs-rest L2-SVMs, scikit-learn's
    LinearSVC loss, whose margins are then turned into log-odds per label by Platt scaling on
    out-of-fold margins; on many-label documents it beat the logistic fit by 0.009 micro-F1 on
    tokens and 0.035 on tokens and pairs (docs/tasks.md, "Many rare labels")."""
    second_bag_ngrams: int = 0
    """With `warm_start`: 0, nothing more; 2 or 3, the warm start also fits a bag-of-terms model of its
    own over tokens and their n-grams up to this order in `second_bag_buckets` hashed rows (the same
    loss, C walked on validation), a candidate of the run's choice named `bag_of_terms_N`
    (tfm_cls.bag.second): a second view of the words, shipped only where validation says it
    holds more than the cheaper ones. The recipe asks for triples where the tokens are characters."""
    second_bag_buckets: int = 2**20
    """The second bag's hashed rows (triples need more rows than pairs: fewer, and their collisions cost
    what they add)."""
    count_special_tokens: bool = False
    """Count the tokens the tokenizer adds to every text ([CLS], [SEP]: tfm_cls.data.tokenizer.marker_ids)
    as terms of the bag, with their pairs with a text's first and last token. false: the bag holds the
    text's own terms, as a TF-IDF vectorizer's does (the model's config records the ids it skips,
    `wide_skip_ids`); with few labels the bag candidate reads the same. Runs before the key counted
    them (docs/recipe.md, "The bag's terms")."""
    char_grams: bool = False
    """Each token also counts the character 2-5-grams of its own text (its word piece, a space where a
    word starts), a second bag normalised on its own beside the tokens' (tfm_cls.data.char_grams):
    the character n-gram view of the classical word + char_wb model, in the graph from the ids
    alone (a table of each token's grams, saved with the weights). The recipe asks for it where the
    tokens are word pieces (docs/recipe.md, "The bag's character view")."""
    lr: float | None = None
    """Learning rate of the branch (None: `train.head_lr`, else `train.lr`); unused with
    `warm_start`, which keeps the branch as fitted."""

    def __post_init__(self) -> None:
        needs = "needs wide.enabled: true"
        _require(self.encoder_length is None or (self.enabled and self.encoder_length >= 2),
                 f"wide.encoder_length={self.encoder_length}: {needs} (the tokens past it are read by the wide "
                 "branch only) and a length >= 2")
        _require(self.enabled or self.weighting == "count", f"wide.weighting={self.weighting}: {needs}")
        _require(self.ngrams in (1, 2, 3) and (self.enabled or self.ngrams == 1),
                 f"wide.ngrams={self.ngrams}: expected 1, 2 or 3, and 2 or 3 {needs}")
        _require(1 <= self.buckets <= 2**31, f"wide.buckets: expected 1 to 2^31, got {self.buckets}")
        _require(self.second_bag_ngrams in (0, 2, 3) and (self.warm_start or not self.second_bag_ngrams),
                 f"wide.second_bag_ngrams={self.second_bag_ngrams}: expected 0, 2 or 3, and 2 or 3 needs "
                 "wide.warm_start: true (the second bag is fitted beside the warm start's)")
        _require(1 <= self.second_bag_buckets <= 2**31,
                 f"wide.second_bag_buckets: expected 1 to 2^31, got {self.second_bag_buckets}")
        _require(self.lr is None or self.lr > 0, f"wide.lr: expected > 0, got {self.lr}")
        _require(self.enabled or not self.char_grams, f"wide.char_grams: {needs}")
        _require(self.enabled or not self.warm_start, f"wide.warm_start fits the bag-of-tokens branch: it {needs}")
        _require(self.loss == "head" or self.warm_start,
                 f"wide.loss={self.loss} is a loss of the warm start's fit: it needs wide.warm_start: true")

    def skip_ids(self, markers: typing.Sequence[int]) -> list[int]:
        """The token ids a bag of terms does not count: the tokenizer's `markers`
        (tfm_cls.data.tokenizer.marker_ids) unless `count_special_tokens`."""
        return [] if self.count_special_tokens else [int(i) for i in markers]

    def model_kwargs(self, markers: typing.Sequence[int] = ()) -> dict[str, typing.Any]:
        """The branch's constructor arguments of `TransformerClassifier`, each only when not its
        default (the model's config records them flat: tfm_cls.model.wide.config_entries);
        `markers`: the tokenizer's, where it is known (`skip_ids`)."""
        kwargs: dict[str, typing.Any] = {}
        if self.enabled:
            kwargs["wide"] = True
        if self.encoder_length is not None:
            kwargs["encoder_length"] = self.encoder_length
        if self.weighting != "count":
            kwargs["wide_weighting"] = self.weighting
        if self.ngrams != 1:
            kwargs.update(wide_ngrams=self.ngrams, wide_buckets=self.buckets)
        if self.enabled and self.skip_ids(markers):
            kwargs["wide_skip_ids"] = self.skip_ids(markers)
        return kwargs
