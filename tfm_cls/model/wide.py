"""The wide branch: a linear bag-of-terms model summed into a classifier's logits (Wide & Deep,
Cheng et al. 2016), the torch side of the `wide:` config section (docs/tasks.md, "Many rare labels").

    branch = WideBranch(vocab_size, num_classes, pad_token_id, weighting="tfidf", ngrams=2, buckets=2**18)
    logits = encoder_logits + branch(input_ids, attention_mask)     # [B, C]

One weight per (term, class) in `weight` [rows, C]; a text's logits are the sum over its terms
(`terms`: its tokens and, with ngrams=2, its hashed pairs of adjacent tokens, with ngrams=3 also its
hashed triples) of each term's
weights times its share of the L2-normalised bag (`shares`: count or TF-IDF). With `tfidf` the
inverse document frequencies of the training texts are a buffer, `idf` [rows], set before training
(tfm_cls.bag.warm_start). Fitting the weights, the warm start and its offsets are the training
side's: tfm_cls.bag.warm_start (the fits: tfm_cls.bag.fit).

The model's config (model_config.json) records the branch flat, as TransformerClassifier's
arguments: `wide`, `wide_weighting`, `wide_ngrams`, `wide_buckets`, `encoder_length`,
`wide_skip_ids` (tokens the bag does not count: the tokenizer's markers), `wide_char_rows` /
`wide_char_slots` (the character view, below), each only when not its default (`config_entries`),
so the configs of models without it stay as they were. Its state-dict keys are `wide.weight`,
`wide.idf` and, with the character view, `wide.char_grams`; weights saved before the branch was a
module of its own hold the IDF table as `wide_idf` and load through `upgrade_state_dict`.

The character view (`char_rows` > 0): each token also counts the character 2-5-grams of its own
text (its word piece, a space where a word starts: scikit-learn's `char_wb` n-grams within a
piece), read from `char_grams` [vocab, char_slots], a table of gram rows made from the tokenizer's
vocabulary (tfm_cls.data.char_grams) and saved with the weights, so the graph needs only the ids.
The grams are a second bag, L2-normalised on its own beside the tokens' (a FeatureUnion of two
TF-IDF views, each scaled by 1 / sqrt(2) so the whole bag keeps a unit norm), their weights in the
last `char_rows` rows of `weight`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor, nn

WEIGHTINGS = ("count", "tfidf")
NGRAMS = (1, 2, 3)
GRAM_NAMES = {2: "pairs", 3: "pairs and triples"}
"""What the hashed rows hold at each order above 1 (the model's description, its repr)."""
BUCKETS = 2**18
"""Rows the pairs (and, with ngrams=3, triples) of adjacent tokens are hashed into (fastText's hashed
word n-grams, one table for every order; 2^18 measured as good as 2^20 on many-label documents,
docs/tasks.md)."""
PAIR_HASH = 2_654_435_761
"""A pair (a, b) of token ids goes to bucket (a * PAIR_HASH + b) mod buckets: Knuth's multiplicative
hash constant (a prime near 2^32 / golden ratio), so (a, b) and (b, a) differ and neighbouring ids
spread over the buckets; in int64 without overflow for vocabularies under 3e9."""
TRIPLE_HASH = 2_246_822_519
"""A triple (a, b, c) goes to bucket (pair(a, b) * TRIPLE_HASH + c) mod buckets, pair(a, b) its first
two tokens' bucket: a second multiplier (xxHash's 32-bit prime 2), so a triple's bucket is not that
of the pair (pair(a, b), c) whenever pair(a, b) is also a token id; in int64 without overflow for
tables under 2^31 rows."""
GRAM_OFFSET = 32_767
"""A compacted character table of at most 65,535 grams is stored as int16, each gram row g (-1: none)
as g - GRAM_OFFSET: half the bytes of int32 (30,522 tokens x 40 slots: 2.4 MB, not 4.9)."""
LEGACY_IDF_KEY = "wide_idf"
"""Where models saved before the branch was a module of its own kept `idf`: read as `wide.idf`."""


class WideBranch(nn.Module):
    """input_ids [B, T] (+ attention_mask [B, T]) -> logits [B, num_classes]: a linear bag of terms.

    `weight` [rows, C] starts at zero (the model starts as the encoder alone); its padding row
    stays zero (no gradient, as nn.Embedding's padding_idx). `lr`: a learning rate of its own,
    set by the training side (tfm_cls.bag.warm_start.train_branch; None: the head's); not saved.
    """

    def __init__(self, vocab_size: int, num_classes: int, pad_token_id: int | None = None, weighting: str = "count",
                 ngrams: int = 1, buckets: int = BUCKETS, skip_ids: Sequence[int] = (), char_rows: int = 0,
                 char_slots: int = 0) -> None:
        super().__init__()
        self.vocab_size, self.weighting, self.ngrams = vocab_size, weighting, ngrams
        # `skip_ids`: tokens the bag does not count, as padding (the tokenizer's [CLS] and [SEP]: the
        # encoder's markers, not the text's words); not saved in the state dict: the config holds them
        self.skip_ids = tuple(int(i) for i in skip_ids)
        self.register_buffer("skip", torch.tensor(self.skip_ids, dtype=torch.int64), persistent=False)  # [S]
        self.buckets = buckets if ngrams >= 2 else 0
        # the character view's rows come last: terms at or past `char_start` are grams
        self.char_rows, self.char_slots = (char_rows, char_slots) if char_rows else (0, 0)
        self.char_start = vocab_size + self.buckets
        self.rows = self.char_start + self.char_rows
        if self.char_rows:  # each token's gram rows (from char_start), -1 past its last: set by set_char_grams
            self.register_buffer("char_grams", torch.full((vocab_size, self.char_slots), -1, dtype=torch.int32))
        self.gram_offset = 0  # GRAM_OFFSET where a compacted table is stored as int16 (`compacted`)
        self.padding_idx = pad_token_id
        self.lr: float | None = None
        self.register_buffer("row_of", None)  # [rows] int32 in a compacted copy (`compacted`), else None
        self.weight = nn.Parameter(torch.empty(self.rows, num_classes))  # [rows, C]
        # drawn as nn.Embedding's init draws (this table was one), then zeroed: the global RNG,
        # and so every later draw of a seeded run (dropout), stays what it was
        nn.init.normal_(self.weight)
        nn.init.zeros_(self.weight)
        # `tfidf`: each term's inverse document frequency in the training texts; 0 for a term never
        # seen there, which then adds nothing to a bag, as a word outside a TF-IDF vocabulary
        if weighting == "tfidf":
            self.register_buffer("idf", torch.ones(self.rows))  # [rows]

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> WideBranch | None:
        """The branch a classifier's config asks for (`config_entries`), or None without `wide`."""
        if not config.get("wide"):
            return None
        return cls(config["vocab_size"], config["num_classes"], config.get("pad_token_id"),
                   config.get("wide_weighting", "count"), config.get("wide_ngrams", 1), config.get("wide_buckets", 0),
                   config.get("wide_skip_ids", ()), config.get("wide_char_rows", 0), config.get("wide_char_slots", 0))

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """input_ids [B, T] -> [B, C]: the sum over the text's terms (`terms`) of each term's class
        weights times its share of the bag (`shares`)."""
        terms, keep = self.terms(input_ids, attention_mask)  # [B, N]
        share = self.shares(terms, keep)  # [B, N]
        # a compacted branch (`compacted`) reads its rows through the map; padding has no row of its own there
        rows, padding = (terms, self.padding_idx) if self.row_of is None else (self.row_of[terms].long(), None)
        if torch.onnx.is_in_onnx_export():  # Gather, Mul, ReduceSum: what every runtime (and the browser's) runs
            weights = nn.functional.embedding(rows, self.weight, padding)  # [B, N, C]
            return (weights * share.unsqueeze(-1)).sum(dim=1)  # [B, C]
        # the same sum without the [B, N, C] gather: a long document's 20k terms x 90 labels x a batch of 64
        # took 460 MB a batch, and 8x the time
        return nn.functional.embedding_bag(rows, self.weight, per_sample_weights=share, mode="sum",
                                           padding_idx=padding)  # [B, C]

    def terms(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """What the bag counts: input_ids [B, T] -> (terms [B, N] int64 rows of `weight`, keep [B, N]
        bool, False at padding and at `skip_ids`). The tokens (N = T) and, with ngrams=2, also each pair of adjacent
        tokens, hashed into one of `buckets` rows after the vocabulary's (N = 2T - 1): the word
        bigrams of a TF-IDF n-gram model, in fastText's hashed form; with ngrams=3 also each triple
        of adjacent tokens, hashed into the same rows (N = 3T - 3). A pair or triple is kept when
        each of its tokens is: none spans a skipped token. With the character view, each token's
        `char_slots` gram rows follow (N += T x char_slots; kept where the token is and the slot holds
        a gram)."""
        terms, keep = self._word_terms(input_ids, attention_mask)
        if not self.char_rows:
            return terms, keep
        grams = self.char_grams[input_ids].long() + self.gram_offset  # [B, T, K] (stored as int32 or int16)
        grams_kept = keep[:, : input_ids.shape[1]].unsqueeze(-1) & (grams >= 0)  # [B, T, K]
        grams = torch.where(grams_kept, grams + self.char_start, torch.zeros_like(grams))  # [B, T, K]
        return (torch.cat([terms, grams.flatten(1)], dim=1),  # [B, N + T*K]
                torch.cat([keep, grams_kept.flatten(1)], dim=1))

    def _word_terms(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """`terms` without the character view: tokens, then pairs, then triples."""
        keep = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask != 0
        if self.skip_ids:
            keep = keep & (input_ids.unsqueeze(-1) != self.skip).all(dim=-1)  # [B, T]
        if self.ngrams == 1:
            return input_ids, keep
        pairs = (input_ids[:, :-1] * PAIR_HASH + input_ids[:, 1:]) % self.buckets  # [B, T-1]
        pairs_kept = keep[:, :-1] & keep[:, 1:]  # [B, T-1]
        if self.ngrams == 2:
            terms = torch.cat([input_ids, pairs + self.vocab_size], dim=1)  # [B, 2T-1]
            return terms, torch.cat([keep, pairs_kept], dim=1)
        triples = (pairs[:, :-1] * TRIPLE_HASH + input_ids[:, 2:]) % self.buckets  # [B, T-2]
        terms = torch.cat([input_ids, pairs + self.vocab_size, triples + self.vocab_size], dim=1)  # [B, 3T-3]
        return terms, torch.cat([keep, pairs_kept, pairs_kept[:, :-1] & keep[:, 2:]], dim=1)

    def shares(self, terms: Tensor, keep: Tensor) -> Tensor:
        """What each term position adds to the text's bag, terms / keep [B, N] (`terms`) -> [B, N]
        (0 where not kept); the shares of a term's positions sum to its value in the bag.
        `count`: 1 / sqrt(the number of terms), an L2-normalised bag of one-hot terms.
        `tfidf`: scikit-learn's TfidfVectorizer(sublinear_tf=True) over the terms, the value of a
        term (1 + log tf) * idf, the bag L2-normalised; a position holds 1 / tf of its term's
        value. The term frequencies are counted on the row's sorted terms (`term_counts`): a table
        the size of the text, where a scatter into a [B, rows] table cleared 2^18 + vocabulary
        floats a text (the bag-of-terms model's cost on short texts), and comparing every position
        with every other cost 40x more at 1,000 tokens. With the character view its grams are
        normalised on their own (a second bag beside the tokens')."""
        keep_f = keep.to(self.weight.dtype)  # [B, N]
        if self.weighting == "count":
            return keep_f / self._view_sums(keep_f, terms).clamp_min(1.0).sqrt()
        tf = term_counts(terms, keep).to(keep_f.dtype).clamp_min(1.0)  # [B, N] this position's term count
        idf = self.idf[terms] if self.row_of is None else self.idf[self.row_of[terms].long()]  # [B, N]
        value = (1.0 + torch.log(tf)) * idf * keep_f  # [B, N] the term's value
        norm = self._view_sums(value * value / tf, terms).sqrt().clamp_min(1e-12)  # the L2 norm of its bag
        return value / tf / norm  # [B, N]

    def _view_sums(self, parts: Tensor, terms: Tensor) -> Tensor:
        """parts [B, N] -> the sum of each position's bag [B, 1], or [B, N] with the character view:
        the tokens' and pairs' sum at theirs, the grams' at the grams', doubled (two bags, each
        normalised to 1 / sqrt(2) on its own, so that the text's whole bag keeps the unit norm the C
        grid of the fit was chosen for: tfm_cls.bag.fit.HINGE_C)."""
        if not self.char_rows:
            return parts.sum(dim=1, keepdim=True)  # [B, 1]
        gram = terms >= self.char_start  # [B, N] a position of the character view
        words = torch.where(gram, torch.zeros_like(parts), parts).sum(dim=1, keepdim=True)  # [B, 1]
        grams = torch.where(gram, parts, torch.zeros_like(parts)).sum(dim=1, keepdim=True)  # [B, 1]
        return 2.0 * torch.where(gram, grams, words)  # [B, N]

    @torch.no_grad()
    def compacted(self) -> WideBranch:
        """A copy for inference whose tables hold only the rows a text can reach with a value, the same
        logits for every input: `weight` [kept + 1, C] and `idf` [kept + 1] (the last row zero, for every
        term outside them), and `row_of` [rows] int32, a term's row there. Kept: with `tfidf`, the terms
        of IDF above 0 (those the training texts hold, at the character view's min_df; a term of IDF 0
        adds nothing to a bag nor to its norm); with `count`, the rows of non-zero weights. With `tfidf`
        the character view keeps only its grams of IDF above 0, numbered again 0..kept-1 (its `char_rows`
        become their number), each token's packed left in as many slots as the most any token keeps, and
        the table is int16 where they fit (GRAM_OFFSET). The exported file's size is then what the
        training data holds, not the hashed table's (tfm_cls.model.bag, export/exporter.py)."""
        full = self.idf > 0 if self.weighting == "tfidf" else self.weight.abs().sum(dim=1) > 0  # [rows]
        kept = full.nonzero(as_tuple=True)[0]  # [kept], the full numbering
        table, reached = self._kept_grams(full)  # [vocab, slots] the new numbering, [char rows] kept
        out = WideBranch(self.vocab_size, self.weight.shape[1], self.padding_idx, self.weighting, self.ngrams,
                         self.buckets or BUCKETS, self.skip_ids, len(reached), table.shape[1])
        # the kept terms in the copy's numbering: the same words, the kept grams 0..kept-1, in the same order
        new_full = torch.cat([full[: self.char_start], reached])  # [out.rows]
        row_of = torch.full((out.rows,), len(kept), dtype=torch.int32)  # [out.rows]
        row_of[new_full] = torch.arange(len(kept), dtype=torch.int32)
        out.row_of = row_of
        out.weight = nn.Parameter(torch.cat([self.weight[kept], self.weight.new_zeros(1, self.weight.shape[1])]),
                                  requires_grad=False)  # [kept + 1, C]
        if self.weighting == "tfidf":
            out.idf = torch.cat([self.idf[kept], self.idf.new_zeros(1)])  # [kept + 1]
        if self.char_rows:
            out.gram_offset = GRAM_OFFSET if out.char_rows <= 2 * GRAM_OFFSET + 1 else 0
            out.char_grams = (table - out.gram_offset).to(torch.int16 if out.gram_offset else torch.int32)
        return out.to(self.weight.device)

    def _kept_grams(self, full: Tensor) -> tuple[Tensor, Tensor]:
        """The compacted character table [vocab, slots] int64 (-1: none) and [grams] bool, which of its
        grams a text reaches with a value. `tfidf`: the grams of IDF above 0 numbered again 0..kept-1,
        each token's packed left, slots the most any token keeps (one gram row and one slot at least, so
        the view and its own norm stay); `count`: the table as it is. No character view: [vocab, 0], []."""
        if not self.char_rows:
            return torch.zeros(self.vocab_size, 0, dtype=torch.int64), full[:0]
        grams = self.char_grams.long() + self.gram_offset  # [vocab, slots]
        if self.weighting != "tfidf":
            return grams, full[self.char_start:]
        on = full[self.char_start:]  # [char_rows] a gram of IDF above 0
        number = torch.cumsum(on.to(torch.int64), dim=0) - 1  # [char_rows] its number among those
        slot_kept = (grams >= 0) & on[grams.clamp(min=0)]  # [vocab, slots]
        renumbered = torch.where(slot_kept, number[grams.clamp(min=0)], torch.full_like(grams, -1))
        # a stable sort on "not kept" moves each row's kept slots first, in their order
        order = torch.sort((~slot_kept).to(torch.int8), dim=1, stable=True).indices  # [vocab, slots]
        slots = max(int(slot_kept.sum(dim=1).max()) if slot_kept.numel() else 0, 1)
        table = renumbered.gather(1, order)[:, :slots].contiguous()  # [vocab, slots]
        reached = torch.ones(int(on.sum()), dtype=torch.bool) if on.any() else torch.zeros(1, dtype=torch.bool)
        return table, reached

    @torch.no_grad()
    def set_char_grams(self, table: Tensor) -> None:
        """The character view's table, [vocab_size, char_slots] integer gram rows in 0..char_rows-1, -1
        for none (tfm_cls.data.char_grams.char_gram_table)."""
        if not self.char_rows or tuple(table.shape) != tuple(self.char_grams.shape):
            raise ValueError(f"WideBranch: a character table of shape {list(self.char_grams.shape) if self.char_rows else None}"
                             f" expected, got {list(table.shape)}")
        if int(table.max()) >= self.char_rows or int(table.min()) < -1:
            raise ValueError(f"WideBranch: character gram rows must be -1 or 0..{self.char_rows - 1}")
        self.char_grams.copy_(table.to(self.char_grams.dtype))

    @torch.no_grad()
    def set_idf(self, idf: Tensor) -> None:
        """The `tfidf` table, idf [rows] (tfm_cls.bag.sparse.set_idf); 0 at the padding row."""
        idf = idf.to(self.idf, copy=True)
        if self.padding_idx is not None:
            idf[self.padding_idx] = 0.0
        self.idf.copy_(idf)

    def extra_repr(self) -> str:
        pairs = f", {GRAM_NAMES[self.ngrams]} in {self.buckets} buckets" if self.ngrams in GRAM_NAMES else ""
        skipped = f", not counting ids {list(self.skip_ids)}" if self.skip_ids else ""
        if self.char_rows:
            skipped += f", each token's character 2-5-grams ({self.char_rows} rows)"
        return f"{self.vocab_size} tokens{pairs}{skipped}, {self.weight.shape[1]} classes, {self.weighting}"


def term_counts(terms: Tensor, keep: Tensor) -> Tensor:
    """terms, keep [B, N] -> [B, N] int64: how often each kept position's term occurs among the kept
    positions of its row (not kept: the count of the not-kept ones). Sort each row, number its runs
    of equal terms, count each run by a scatter-add into a [B, N] table, and send the counts back to
    the positions: static shapes, so one ONNX graph (TopK, CumSum, ScatterElements) for any length."""
    key = torch.where(keep, terms, torch.full_like(terms, -1))  # padding: a run of its own
    sorted_key, order = torch.sort(key, dim=1)  # [B, N]
    starts = torch.cat([torch.ones_like(sorted_key[:, :1], dtype=torch.bool),
                        sorted_key[:, 1:] != sorted_key[:, :-1]], dim=1)  # [B, N] a run begins here
    run = torch.cumsum(starts.to(torch.int64), dim=1) - 1  # [B, N] the run of each sorted position
    lengths = torch.zeros_like(run).scatter_add(1, run, torch.ones_like(run))  # [B, N] each run's length
    return torch.zeros_like(run).scatter(1, order, lengths.gather(1, run))  # [B, N] back in position order


def config_entries(wide: bool = False, encoder_length: int | None = None, weighting: str = "count", ngrams: int = 1,
                   buckets: int = BUCKETS, skip_ids: Sequence[int] = (), char_rows: int = 0,
                   char_slots: int = 0) -> dict[str, Any]:
    """The branch's keys of a classifier's config, each only when it is not its default (so the
    configs of models without it stay as they were), in the order models have always saved them."""
    entries: dict[str, Any] = {"wide": True} if wide else {}
    if weighting != "count":
        entries["wide_weighting"] = weighting
    if encoder_length is not None:
        entries["encoder_length"] = int(encoder_length)
    if ngrams != 1:
        entries["wide_ngrams"] = int(ngrams)
        entries["wide_buckets"] = int(buckets)
    if skip_ids:
        entries["wide_skip_ids"] = list(skip_ids)
    if char_rows:
        entries.update(wide_char_rows=int(char_rows), wide_char_slots=int(char_slots))
    return entries


def check_config(config: Mapping[str, Any]) -> None:
    """ValueError naming the key for branch keys of a classifier's config that cannot work."""
    if not isinstance(config.get("wide", False), bool):
        raise ValueError(f"TransformerClassifier: wide must be true or false, got {config['wide']!r}")
    weighting = config.get("wide_weighting", "count")
    if weighting not in WEIGHTINGS or (weighting != "count" and not config.get("wide")):
        raise ValueError(f"TransformerClassifier: wide_weighting must be one of {list(WEIGHTINGS)} (and needs "
                         f"wide=True), got {weighting!r}")
    ngrams = config.get("wide_ngrams", 1)
    if ngrams not in NGRAMS or (ngrams != 1 and not config.get("wide")):
        raise ValueError(f"TransformerClassifier: wide_ngrams must be one of {list(NGRAMS)} (and needs wide=True), "
                         f"got {ngrams!r}")
    if ngrams >= 2 and not (isinstance(config.get("wide_buckets"), int) and 1 <= config["wide_buckets"] <= 2**31):
        raise ValueError("TransformerClassifier: wide_buckets must be an integer from 1 to 2^31 (the hashes' int64 "
                         f"range), got {config.get('wide_buckets')!r}")
    skip = config.get("wide_skip_ids", [])
    if not (isinstance(skip, list | tuple) and (config.get("wide") or not skip)
            and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < int(config["vocab_size"]) for i in skip)):
        raise ValueError("TransformerClassifier: wide_skip_ids must be a list of token ids below vocab_size "
                         f"({config['vocab_size']}) (and needs wide=True), got {skip!r}")
    rows, slots = config.get("wide_char_rows", 0), config.get("wide_char_slots", 0)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (rows, slots)) or (
            (rows or slots) and not (config.get("wide") and rows >= 1 and slots >= 1)):
        raise ValueError("TransformerClassifier: wide_char_rows and wide_char_slots must be positive integers together "
                         f"(and need wide=True), got {rows!r} and {slots!r}")
    length = config.get("encoder_length")
    if length is not None and not (config.get("wide") and 2 <= int(length) <= int(config["max_len"])):
        raise ValueError(
            f"TransformerClassifier: encoder_length={length} needs wide=True and 2 <= encoder_length <= max_len "
            f"({config['max_len']}): the tokens past it are read by the wide branch only"
        )


def token_limit(config: Mapping[str, Any]) -> int | None:
    """The most tokens a model of this config can read: its positional encoding's size, or None
    (no limit) when the encoder reads only the first `encoder_length` tokens and the wide branch,
    which has no positions, the rest, or there is no encoder at all (tfm_cls.model.bag)."""
    if config.get("encoder_length") is not None or config.get("architecture") == "bag_of_terms":
        return None
    return int(config["max_len"])


def longest_input(config: Mapping[str, Any], max_length: int | None) -> int:
    """The longest input a model of this config is checked on (export/verify.py): what it can
    read (`token_limit`), else, where the branch reads past the encoder's `encoder_length`, the
    tokenizer's `max_length` of its export (its `max_len` when unknown)."""
    return token_limit(config) or int(max_length or config["max_len"])


def upgrade_state_dict(module: nn.Module, state_dict: dict[str, Tensor], prefix: str, *_: Any) -> None:
    """A classifier's load_state_dict pre-hook: renames, in place, the keys of state dicts saved
    before the branch was a module of its own (`wide_idf` -> `wide.idf`; `wide.weight` kept its
    name), so every earlier run directory and checkpoint loads; `prefix` is the classifier's."""
    old = prefix + LEGACY_IDF_KEY
    if old in state_dict:
        state_dict[prefix + "wide.idf"] = state_dict.pop(old)
