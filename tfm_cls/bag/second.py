"""A second bag of terms, fitted as a model of its own and offered to the run's choice: another view of
the words (`wide.second_bag_ngrams`: tokens and their n-grams up to that order, in
`wide.second_bag_buckets` hashed rows) beside the warm start's branch.

    fit_second_bag(cfg, model, splits, labels, run_dir, clock)   # tfm_cls.train.recipe, after start_wide
    second_bag(cfg, run_dir, device)                             # tfm_cls.bag.candidates: (name, model)
    train_out_of_fold(run_dir, name, shape)                      # a bag's out-of-fold training logits, or None

The recipe asks for tokens, pairs and triples where the tokens are characters (Chinese, Japanese: a word
is two or three of them, and the classical character n-gram models beat a bag of pairs there), and
the run's choice (tfm_cls.bag.candidates.pick) ships it only where its validation score is more
than one paired standard error above the cheaper bag's. It is the warm start's fit
(tfm_cls.bag.fit.fit_linear: the same loss, C walked on validation, hinge margins scaled
into log-odds on out-of-fold margins), made on a fresh run before the first step, under the same
deadline (skipped, and said, where the warm start's share of the budget is spent), and written at
once to RUN/candidates/bag_of_terms_N/ (model_config.json, model.safetensors, and out_of_fold.safetensors
where its folds were fitted: the run's choice compares the two bags on those too), where a resumed run
finds it (a run killed before it was written resumes without it: the loop's checkpoint is worth more
than a refit). When it ships, that folder keeps its copy (a finish that is interrupted and resumed makes
the same choice again).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from tfm_cls import runs as R
from tfm_cls.bag.fit import fit_linear
from tfm_cls.bag.sparse import set_idf
from tfm_cls.bag.warm_start import OFFSETS_FILE, OUT_OF_FOLD, read_out_of_fold
from tfm_cls.classify.heads import head_for
from tfm_cls.data.tokenized import TokenizedSplit
from tfm_cls.io import read_json, write_json
from tfm_cls.model.bag import BagOfTermsClassifier
from tfm_cls.runs import CANDIDATES_DIR
from tfm_cls.training.budget import FIRST_FIT
from tfm_cls.training.clock import WallClock
from tfm_cls.weights import load_weights, save_tensors, save_weights

logger = logging.getLogger(__name__)

OUT_OF_FOLD_FILE = "out_of_fold.safetensors"
"""RUN/candidates/bag_of_terms_N/out_of_fold.safetensors: the second bag's out-of-fold training logits
{OUT_OF_FOLD: [rows, C] float32} (the first bag's lie in RUN/wide_offsets.safetensors)."""


def name_of(ngrams: int) -> str:
    """The candidate's name (its folder under RUN/candidates/, its row of the front)."""
    return f"bag_of_terms_{ngrams}"


def fit_second_bag(cfg: Any, model: nn.Module, splits: dict[str, TokenizedSplit], labels: list[str], run_dir: Path,
                   clock: WallClock | None = None) -> Path | None:
    """Fit the second bag (module docstring) and write it to RUN/candidates/NAME/; returns that folder,
    or None where the config asks for none, there is no validation split to choose on, or the clock
    has no time for it (said in its `shrunk`)."""
    wide = cfg.wide
    validation = splits.get("validation")
    if not (wide.enabled and wide.warm_start and wide.second_bag_ngrams) or validation is None \
            or validation.num_rows == 0:
        return None
    name = name_of(wide.second_bag_ngrams)
    if clock is not None and clock.warm_start_spent():
        clock.shrink(f"no {name} candidate (the warm start's share of the budget is spent)")
        return None
    # its first fit cannot be cut: it starts only where one as long as the first bag's fits (tnews under load:
    # the pairs' 61 s, the triples' 70 s, started with 100 s left, ended the run at 303 s of 300)
    first_fit = clock.recorded(FIRST_FIT) if clock is not None else 0.0
    if clock is not None and not clock.warm_start_affords(first_fit):
        clock.shrink(f"no {name} candidate (a first fit as long as the first bag's, ~{first_fit:.0f} s, does not fit "
                     f"in the warm start's share: {max(clock.left(), 0):.0f} s left)")
        return None
    started = time.monotonic()
    train = splits["train"]
    config = model.config
    longest = int(train.lengths.max(initial=1))
    bag = BagOfTermsClassifier(config["vocab_size"], config["num_classes"], config.get("pad_token_id"),
                               max(longest, 2), "tfidf", wide.second_bag_ngrams, wide.second_bag_buckets,
                               wide_skip_ids=config.get("wide_skip_ids", ()))
    set_idf(bag.wide, train)
    head = head_for(cfg, train.labels, labels=labels)
    fitted = fit_linear(bag.wide, torch.zeros(config["num_classes"]), head, train, validation,
                        cfg.train.best_metric, labels, wide.loss, clock, what=f"the {name} candidate",
                        folds_for=f"the {name} candidate's scaling")
    with torch.no_grad():
        bag.wide.weight.copy_(fitted.weights)
        bag.bias.copy_(fitted.bias)
    folder = run_dir / CANDIDATES_DIR / name
    folder.mkdir(parents=True, exist_ok=True)
    save_weights(bag, folder / R.WEIGHTS_FILE)
    if fitted.out_of_fold is not None and fitted.rows is None:  # a sample's are not every training row's
        save_tensors({OUT_OF_FOLD: fitted.out_of_fold.detach().float().contiguous()}, folder / OUT_OF_FOLD_FILE)
    write_json(folder / R.MODEL_CONFIG_FILE, bag.config)  # last: a folder with its config holds the others
    logger.info("candidate %s: fitted (%s, C %g, validation %s %.4f) in %.1f s, %s", name, fitted.method, fitted.c,
                cfg.train.best_metric, fitted.score, time.monotonic() - started, folder)
    return folder


def second_bag(cfg: Any, run_dir: Path, device: str | torch.device = "cpu") -> tuple[str, nn.Module] | None:
    """The second bag a run made (its name and model, the fitted weights loaded), or None where its
    config asks for none or it was not made (no time, no validation split)."""
    ngrams = getattr(getattr(cfg, "wide", None), "second_bag_ngrams", 0)
    if not ngrams:
        return None
    folder = run_dir / CANDIDATES_DIR / name_of(ngrams)
    if not (folder / R.MODEL_CONFIG_FILE).is_file():
        return None
    bag = R.build_model(read_json(folder / R.MODEL_CONFIG_FILE))
    load_weights(bag, folder / R.WEIGHTS_FILE)
    return name_of(ngrams), bag.to(device)


def train_out_of_fold(run_dir: Path, name: str, shape: tuple[int, int]) -> np.ndarray | None:
    """The out-of-fold training logits [rows, C] of the bag candidate `name` (`bag_of_terms`: the warm
    start's, in RUN/wide_offsets.safetensors; `bag_of_terms_N`: this module's), or None where there are
    none of that `shape` (no folds fitted, another candidate, a run made before they were kept)."""
    if name == "bag_of_terms":
        return read_out_of_fold(run_dir / OFFSETS_FILE, shape)
    if name.startswith("bag_of_terms_"):
        return read_out_of_fold(run_dir / CANDIDATES_DIR / name / OUT_OF_FOLD_FILE, shape)
    return None
