"""The run's time budget in figures: every constant a time decision of `tfm-cls train` is made by, each
with what it is and where it was measured. The run's one WallClock (tfm_cls.training.clock) applies them
while the run goes; the planner (tfm_cls.train.plan.rules) estimates with them before it starts
(`overhead_minutes`). Plain numbers and arithmetic, no torch: the planner imports this.

    before the run (the planner)    TEXTS_PER_SECOND_EVAL, TRAIN_TEXTS_PER_SECOND, overhead_minutes
    tokenizing (train.recipe)       TOKENIZE_SHARE, TOKENIZE_PROBE            -> WallClock.rows_in_share
    the bags' fits, the loop        LOOP_SHARE, MIN_TRAINING_SHARE, UNHELD_SHARE, FIRST_FIT
                                                                              -> WallClock.plan_loop, ...
    the end of the run              END_SHARE, END_MIN_EXAMPLES               -> train.end_sample
                                    FIXED_SECONDS, WRITE_SECONDS, CHEAP_SECONDS, SHRINK_MARGIN
                                                                              -> WallClock.reserve_at, ...
    the classical baseline          BASELINE_PROBE, BASELINE_GROWTH, BASELINE_SHARE, BASELINE_MIN_SECONDS,
                                    BASELINE_MARGIN
                                                                              -> next_baseline_fit

A module's other constants (an L-BFGS chunk, a grid's least length, a probe's rows) say how much work a
step does, not how long: they stay with it. Changing a figure here retunes the run; moving one here
changed nothing.
"""

from __future__ import annotations

# ---- before the run: the planner's estimates (tfm_cls.train.plan.rules) --------------------------------

TEXTS_PER_SECOND_EVAL = 120.0
"""Texts of ~32 tokens the encoder scores per second on one CPU thread (measured with MiniLM here:
docs/recipe.md); longer texts cost proportionally more."""
TRAIN_TEXTS_PER_SECOND = 24.0
"""Texts of ~32 tokens a second of training (forward + backward) on one CPU thread."""
OVERHEAD_FIXED_MINUTES = 0.3
"""The planner's estimate of the minutes outside the loop whatever the data: loading the encoder, writing
the run (set with the planner, issue 36)."""
BASELINE_MINUTES = 0.1
"""The planner's estimate of the classical baseline's minutes: this, plus a minute per
BASELINE_TEXTS_PER_MINUTE training texts (issue 36)."""
BASELINE_TEXTS_PER_MINUTE = 40_000
"""Training texts the classical baseline is estimated to fit a minute (the planner's; issue 36)."""
WARM_START_MINUTES = 0.2
"""The planner's estimate of the wide branch's warm start with its five folds: this, plus a minute per
WARM_START_TEXTS_PER_MINUTE training texts, LONG_DOCUMENT_FACTOR times that on long documents (issue 36)."""
WARM_START_TEXTS_PER_MINUTE = 10_000
"""Training texts the warm start is estimated to fit a minute, folds included (the planner's; issue 36)."""
LONG_DOCUMENT_FACTOR = 3
"""How many times a short text's warm start a long document's costs (the planner's estimate)."""
MAX_OVERHEAD_SHARE = 0.5
"""The planner never takes more than this share of the budget off the loop for what runs outside it."""


def overhead_minutes(minutes: float, train: int, evaluated: int, text_cost: float, wide: bool = False,
                     long_documents: bool = False) -> float:
    """The planner's minutes outside the training loop: OVERHEAD_FIXED_MINUTES, scoring `evaluated`
    validation and test texts at TEXTS_PER_SECOND_EVAL (each costing `text_cost` times a 32-token one),
    the classical baseline on `train` texts, and (`wide`) the branch's warm start with its five folds; at
    most MAX_OVERHEAD_SHARE of `minutes`."""
    scoring = evaluated * text_cost / TEXTS_PER_SECOND_EVAL / 60
    baseline = BASELINE_MINUTES + train / BASELINE_TEXTS_PER_MINUTE
    warm = (WARM_START_MINUTES + train / WARM_START_TEXTS_PER_MINUTE * (LONG_DOCUMENT_FACTOR if long_documents else 1)
            ) if wide else 0.0
    return min(MAX_OVERHEAD_SHARE * minutes, OVERHEAD_FIXED_MINUTES + scoring + baseline + warm)


# ---- tokenizing (tfm_cls.train.recipe._rows_in_budget) ----------------------------------------------------

TOKENIZE_SHARE = 0.25
"""Under a wall-clock budget, tokenizing the training texts may take at most this share of it: past it, the
run trains on a seeded sample of as many texts as the share tokenizes (`_rows_in_budget`), decided before
tokenizing from a timed probe of the texts at hand, so every later stage (the bags, the encoder's epochs,
the baseline) is sized to it too. A million short texts take ~2-4 minutes of a 15-minute budget here."""
TOKENIZE_PROBE = 2000
"""Training texts tokenized (and timed) first, where the split holds more than TOKENIZE_BLOCK."""


# ---- the bags' fits and the encoder's loop (tfm_cls.bag.fit, warm_start, second) ---------------------

LOOP_SHARE = 0.4
"""Under a wall-clock budget the warm start leaves the encoder's loop at least this share of it (where
the loop can use it: WallClock.plan_loop)."""
MIN_TRAINING_SHARE = 0.5
"""The loop is held its share only where at least this part of it would go to training, not to scoring
the trained encoder at the end (WallClock.plan_loop)."""
UNHELD_SHARE = 0.25
"""Where the loop is not held its share, this part of it stays unspent before the loop all the same: a
margin for the fits that cannot be cut (liblinear's), each started on an estimate (the grid's next C, the
folds), and the second bag's first fit, which starts before the deadline with none (tnews: 35-55 s)."""
FIRST_FIT = "a bag's first fit"
"""The stage the clock records (WallClock.record) as the seconds from a bag's fit_linear call to its first
fit made (its bags read, its IDF applied): a second bag, which reads more n-grams, estimates its own by it."""


# ---- the end of the run (tfm_cls.classify.finish, candidates) -------------------------------------------

FIXED_SECONDS = 30.0
"""The end of a run beyond scoring rows: timing each candidate (tfm_cls.bag.candidates, at most
10 s each), calibration, writing the weights, figures and the card."""
WRITE_SECONDS = 5.0
"""The very end of a run: calibration, the weights, figures and the card written (within FIXED_SECONDS)."""
CHEAP_SECONDS = 10.0
"""A candidate whose test scoring is measured to take less than this is scored whatever the clock says."""
END_SHARE = 0.5
"""Scoring validation and test with the model the end of the run scores (the encoder, or the few-label path's
chosen model) may take at most this share of the budget (the planner's MAX_OVERHEAD_SHARE): past it, each is
a seeded sample of as many examples as fit (`data.max_eval_samples`, tfm_cls.train.end_sample), decided from
a probe of that model before the stage that scores them. 1,000 long documents of 90 labels at 5 minutes: the
end was measured to need 1,202 s for 2,000 + 2,000 documents; a 1M-row file with no validation file carves
100k validation texts."""
END_MIN_EXAMPLES = 200
"""A sampled validation or test split keeps at least this many examples (all, where it has fewer), however
short the budget: below it a score says too little (a standard error of ~3 points at 80 % accuracy)."""
SHRINK_MARGIN = 3.0
"""A smaller bag is tried (tfm_cls.bag.shrink.smallest_holding, the chosen bag shrunk by
tfm_cls.bag.candidates.smaller_bag) where this many times the last try's seconds (the first: the choice's
validation pass of the bag) fit before the end's WRITE_SECONDS: a try also rounds and prunes the table (a
90-label long-document bag: ~1 s to round, ~1 s to score 2,000 validation texts on one thread)."""


# ---- the classical baseline (tfm_cls.classify.finish._baseline_in_budget) --------------------------------

BASELINE_PROBE = 100
"""Under a wall-clock budget the baseline is first fitted on this many training texts, and timed; then on
BASELINE_GROWTH times as many while the time left affords the measured cost scaled up, so what a size
costs is known before it is fitted and the run never starts a fit it has no time for (a 90-label set of
long documents: a first probe of 2,000 texts took 396 s, started with 0 s left; one of 500, 160 s and 7.8 GB,
started with ~100 s left: a logistic regression's 90 classes over long documents' word and character grams)."""
BASELINE_GROWTH = 4
"""Each fit of the baseline takes this many times the texts of the one before (the last: all of them)."""
BASELINE_SHARE = 0.2
"""The baseline's fits together take at most this share of the budget (a reference beside the model, not a
model the run ships): the 90-label set of 7,000 long documents, its loop stopped at step 0, gave the rest of
its budget, 193 s, to a baseline scoring 75 % where the model scored 100 %."""
BASELINE_MIN_SECONDS = 15.0
"""Under this many seconds left no baseline is fitted."""
BASELINE_MARGIN = 1.5
"""The last fit's time scaled by the rows is multiplied by this before the next is judged affordable: an
iterative solver takes more iterations on more rows (go_emotions, 43k texts, 5 minutes: the whole fit
after the probe ended the run at 314 s)."""


def next_baseline_fit(rows: int, seconds: float, n: int) -> tuple[int, float]:
    """After a fit of the baseline on `rows` of `n` training texts took `seconds`: the next fit's texts
    (BASELINE_GROWTH times as many, at most `n`) and the seconds it is expected to take (the time scaled
    by the texts, times BASELINE_MARGIN)."""
    following = min(n, rows * BASELINE_GROWTH)
    return following, BASELINE_MARGIN * seconds * following / rows

# ---- the few-label regime (tfm_cls.bag.few_labels) ---------------------------------------------

FEW_LABEL_FIT_SHARE = 0.2
"""The few-label cross-validation's bag fits (one a fold, then the shipped bag's) share at most this much
of the budget, each stopping at its turn's end: 1,000 long documents of 90 labels (11 a label) had them
run 11 minutes of a 5-minute budget, an L-BFGS over 262,144 hashed rows x 90 labels a fold (docs/recipe.md)."""
