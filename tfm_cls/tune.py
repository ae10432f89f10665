"""Hyperparameter search (`tfm-cls tune`): an Optuna study whose trials are ordinary training runs.

    cfg = load_config(TuneConfig, "trec")          # configs/tune/trec.yaml: base config + `tune:` space
    result = tune(cfg, retrain=True)               # RUN/study.db, RUN/trials/<n>/, RUN/best.yaml, RUN/best/

Each trial is `tfm_cls.train.train` on the base classifier config plus the trial's sampled values
(`tune.space`, dotted keys such as `train.lr`) and the short-run `tune.trial_overrides`, in
RUN/trials/<n>. A trial is scored on VALIDATION only: `train(score_test=False)` drops the test
split before anything is tokenized, so no choice the search makes can see a test label. The
engine's evaluations reach Optuna through a ScalarSink (`PruningSink`) that reports each one and
stops the trial when the median pruner says so. The study lives in SQLite (RUN/study.db): a
killed search rerun with the same command keeps its finished trials and runs only the missing
ones (the trial that was running when it died is marked failed and not counted). At the end the
best trial's values on the base config are written as RUN/best.yaml (atomically) and, with
`retrain`, trained in full (test scored) into RUN/best/.

Optuna is an optional extra (`pip install tfm-cls[optuna]`); this module imports it only when a
study runs.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import typing
from pathlib import Path
from typing import Any, ClassVar

import yaml

from tfm_cls.config import (
    ClassifierConfig,
    RunConfig,
    apply_overrides,
    from_dict,
    load_config,
    require,
    save_config,
    to_dict,
)
from tfm_cls.errors import ConfigError, RunDirError, TfmClsError
from tfm_cls.io import write_json

logger = logging.getLogger(__name__)

STUDY_FILE = "study.db"
TUNE_CONFIG_FILE = "tune_config.yaml"
TRIALS_DIR = "trials"
TRIALS_FILE = "trials.json"
BEST_CONFIG_FILE = "best.yaml"
BEST_RUN_DIR = "best"
# Keys that may change between a killed search and its rerun: how long and how many, not what.
RESUMABLE_KEYS = ("trials", "max_minutes")


# ---- configuration (configs/tune/*.yaml) -----------------------------------------------------------


@dataclasses.dataclass(kw_only=True)
class ParamRange:
    """The values one config key may take: a range (`low`, `high`, optionally `log` or `step`) or
    a list of `choices`. Integers in both bounds make an integer range (e.g. model.num_layers)."""

    low: int | float | None = None
    high: int | float | None = None
    log: bool = False
    """Sample uniformly in log space (learning rates, weight decay)."""
    step: int | float | None = None
    """Grid step of the range (e.g. 1000 for tokenizer.vocab_size); None: continuous / every integer."""
    choices: list[Any] | None = None
    """Categorical values (e.g. d_model [64, 128, 256]); excludes low/high."""

    def __post_init__(self) -> None:
        if self.choices is not None:
            require(self.low is None and self.high is None, "give either choices or low/high, not both")
            require(len(self.choices) > 0, "choices: expected at least one value, got an empty list")
            return
        require(self.low is not None and self.high is not None, "expected low and high (or choices)")
        require(self.low < self.high, f"empty or inverted range: low={self.low} must be below high={self.high}")
        require(not self.log or self.low > 0, f"log range: low must be > 0, got {self.low}")
        require(not (self.log and self.step), "a log range takes no step")
        require(self.step is None or self.step > 0, f"step: expected > 0, got {self.step}")

    @property
    def is_int(self) -> bool:
        return self.choices is None and all(isinstance(v, int) for v in (self.low, self.high, self.step or 1))

    def suggest(self, trial: Any, name: str) -> Any:
        """This parameter's value for an Optuna trial."""
        if self.choices is not None:
            return trial.suggest_categorical(name, self.choices)
        if self.is_int:
            return trial.suggest_int(name, self.low, self.high, step=self.step or 1, log=self.log)
        return trial.suggest_float(name, float(self.low), float(self.high), step=self.step, log=self.log)


def _check_dotted_key(key: str) -> None:
    """`key` must name a field of ClassifierConfig (`train.lr`, `model.dropout`, ...)."""
    node: Any = ClassifierConfig
    for part in key.split("."):
        if not dataclasses.is_dataclass(node):
            raise ValueError(f"tune.space: {key!r}: {part!r} is below a value, not a section")
        fields = {f.name for f in dataclasses.fields(node)}
        require(part in fields, f"tune.space: unknown config key {key!r} ({part!r} is not one of {sorted(fields)})")
        node = typing.get_type_hints(node)[part]
    require(not dataclasses.is_dataclass(node), f"tune.space: {key!r} is a section, not a value")


@dataclasses.dataclass(kw_only=True)
class TuneSection:
    trials: int = 20
    """Finished trials (complete or pruned) the study should hold; a resumed study runs the rest."""
    max_minutes: float | None = 30.0
    """Wall-clock budget of the whole search, summed over resumes; a trial is never started after
    it is spent, and each trial's own train.max_minutes is cut to what is left."""
    metric: typing.Literal["accuracy", "macro_f1", "loss"] | None = None
    """Validation metric to optimise (loss: minimised); None: the base config's train.best_metric."""
    trial_overrides: list[str] = dataclasses.field(default_factory=lambda: ["train.progress=false"])
    """Dotted overrides of every trial only (a short run: e.g. train.max_minutes=3,
    train.early_stopping_patience=2); not part of best.yaml."""
    startup_trials: int = 3
    """Median pruner: no trial is pruned before this many trials have finished."""
    warmup_evaluations: int = 1
    """Median pruner: a trial's first N validation evaluations never prune it."""
    space: dict[str, ParamRange] = dataclasses.field(default_factory=dict)
    """The search space: dotted ClassifierConfig key -> its range, e.g.
    `train.lr: {low: 1.0e-4, high: 3.0e-3, log: true}`, `model.num_layers: {low: 1, high: 4}`."""

    def __post_init__(self) -> None:
        require(self.trials >= 1, f"tune.trials: expected >= 1, got {self.trials}")
        require(self.max_minutes is None or self.max_minutes > 0, f"tune.max_minutes: expected > 0, got {self.max_minutes}")
        require(self.startup_trials >= 0, f"tune.startup_trials: expected >= 0, got {self.startup_trials}")
        require(self.warmup_evaluations >= 0, f"tune.warmup_evaluations: expected >= 0, got {self.warmup_evaluations}")
        require(bool(self.space), "tune.space: declare at least one parameter to search")
        parsed = {}
        for key, spec in self.space.items():
            _check_dotted_key(key)
            if isinstance(spec, ParamRange):
                parsed[key] = spec
                continue
            if not isinstance(spec, dict):
                raise ValueError(f"tune.space.{key}: expected a mapping (low/high/log/step or choices), got {spec!r}")
            try:
                parsed[key] = from_dict(ParamRange, spec, f"tune.space.{key}")
            except ConfigError as err:
                raise ValueError(str(err)) from err
        self.space = parsed


@dataclasses.dataclass(kw_only=True)
class TuneConfig(RunConfig):
    """Everything `tfm-cls tune` needs; saved resolved as tune_config.yaml in the run directory."""

    preset_folder: ClassVar[str] = "tune"
    name: str = "tune"
    base: str = "bbc"
    """The classifier config every trial starts from: a preset name (configs/cls) or a YAML file."""
    base_overrides: list[str] = dataclasses.field(default_factory=list)
    """Dotted overrides of the base config for the trials and best.yaml (e.g. data.path=...)."""
    tune: TuneSection = dataclasses.field(default_factory=TuneSection)

    def base_config(self, *extra: str) -> ClassifierConfig:
        return load_config(ClassifierConfig, self.base, [*self.base_overrides, *extra])


def split_overrides(overrides: list[str]) -> tuple[list[str], list[str]]:
    """Command-line overrides of `tfm-cls tune`: keys of TuneConfig (`tune.trials=5`, `name=x`,
    `base=...`) and everything else, which goes to the base classifier config (`data.path=...`)."""
    own = {f.name for f in dataclasses.fields(TuneConfig)}
    mine = [o for o in overrides if o.split("=", 1)[0].split(".")[0] in own]
    return mine, [o for o in overrides if o not in mine]


def load_tune_config(path: str | None, overrides: list[str]) -> TuneConfig:
    """configs/tune/<path>.yaml + overrides (split as `split_overrides` says); checks the base."""
    mine, base_extra = split_overrides(overrides)
    cfg = load_config(TuneConfig, path, mine)
    cfg.base_overrides = [*cfg.base_overrides, *base_extra]
    cfg.base_config()  # an unknown base preset or override key fails here, before any trial
    return cfg


# ---- the study ----------------------------------------------------------------------------------------


def _optuna() -> Any:
    try:
        import optuna
    except ImportError as err:
        raise ConfigError("tfm-cls tune needs Optuna: pip install 'tfm-cls[optuna]'") from err
    return optuna


class PruningSink:
    """A ScalarSink that reports each validation evaluation of a trial to Optuna and raises
    optuna.TrialPruned when the pruner stops it (the engine's `sinks=` hook)."""

    def __init__(self, trial: Any, metric: str) -> None:
        self.trial, self.tag, self.evaluations = trial, f"validation/{metric}", 0

    def scalars(self, step: int, values: dict[str, float]) -> None:
        if self.tag not in values:
            return
        self.evaluations += 1  # the pruner compares trials at the same evaluation, whatever their batch size
        self.trial.report(float(values[self.tag]), self.evaluations)
        if self.trial.should_prune():
            raise _optuna().TrialPruned(f"pruned at evaluation {self.evaluations} (step {step})")


def _prepare_run_dir(cfg: TuneConfig, overwrite: bool) -> Path:
    """Create the search's folder; a folder holding a different search is refused unless `overwrite`."""
    run_dir = cfg.resolved_run_dir()
    saved_file = run_dir / TUNE_CONFIG_FILE
    if saved_file.is_file() and not overwrite:
        saved = yaml.safe_load(saved_file.read_text(encoding="utf-8")) or {}
        current = to_dict(cfg)
        for data in (saved, current):
            data.pop("run_dir", None)
            for key in RESUMABLE_KEYS:
                data.get("tune", {}).pop(key, None)
        if saved != current:
            raise RunDirError(
                f"{run_dir} holds a different search ({saved_file} differs); pass --overwrite to start it "
                "again, or choose another run_dir=PATH"
            )
    elif overwrite and (run_dir / STUDY_FILE).exists():
        (run_dir / STUDY_FILE).unlink()
    elif not saved_file.is_file() and run_dir.is_dir() and any(run_dir.iterdir()) and not overwrite:
        raise RunDirError(f"{run_dir} exists and holds no search ({TUNE_CONFIG_FILE} missing); pass --overwrite")
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, saved_file)
    return run_dir


def _trial_overrides(values: dict[str, Any]) -> list[str]:
    return [f"{key}={value!r}" if isinstance(value, float) else f"{key}={value}" for key, value in values.items()]


def _summary(study: Any) -> list[dict[str, Any]]:
    return [
        {"number": t.number, "state": t.state.name, "value": t.value, "params": t.params,
         "seconds": (t.datetime_complete - t.datetime_start).total_seconds() if t.datetime_complete else None}
        for t in study.trials
    ]


def _open_study(optuna: Any, cfg: TuneConfig, run_dir: Path, metric: str) -> Any:
    """The study in RUN/study.db, created or resumed; a trial left RUNNING by a dead process is
    marked failed (it runs again)."""
    ts = cfg.tune
    study = optuna.create_study(
        study_name=cfg.name, storage=f"sqlite:///{(run_dir / STUDY_FILE).resolve()}", load_if_exists=True,
        direction="minimize" if metric == "loss" else "maximize",
        pruner=optuna.pruners.MedianPruner(n_startup_trials=ts.startup_trials, n_warmup_steps=ts.warmup_evaluations),
    )
    # A resumed session must not replay the first session's random draws: its sampler's seed moves on
    # with the trials already in the study (a fresh study gets exactly `seed`).
    study.sampler = optuna.samplers.TPESampler(seed=cfg.seed + len(study.trials))
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        # A trial still RUNNING in the file belongs to a process that died (one search per folder).
        study._storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.FAIL)
        logger.info("trial %d was interrupted: marked failed, it will be run again", t.number)
    return study


def _best(optuna: Any, cfg: TuneConfig, study: Any, run_dir: Path, metric: str, retrain: bool,
          finished_states: tuple[Any, ...]) -> dict[str, Any]:
    """best.yaml from the best completed trial (and, with `retrain`, its full run in RUN/best/)."""
    from tfm_cls.train import train

    completed = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not completed:
        raise RunDirError(f"{run_dir}: no trial completed (see {run_dir / TRIALS_FILE}); raise tune.max_minutes")
    best = study.best_trial
    best_cfg = cfg.base_config(
        *_trial_overrides(best.params), f"name={cfg.base_config().name}-tuned", f"run_dir={run_dir / BEST_RUN_DIR}"
    )
    save_config(best_cfg, run_dir / BEST_CONFIG_FILE)
    logger.info("best trial %d: validation %s %.4f with %s -> %s", best.number, metric, best.value,
                " ".join(_trial_overrides(best.params)), run_dir / BEST_CONFIG_FILE)
    result: dict[str, Any] = {
        "metric": metric, "best_trial": best.number, "best_value": best.value, "best_params": best.params,
        "trials": len(study.get_trials(deepcopy=False, states=finished_states)),
        "best_config": str(run_dir / BEST_CONFIG_FILE), "retrained": None,
    }
    if retrain:
        metrics = train(best_cfg, overwrite=True)
        result["retrained"] = {split: {k: metrics[split][k] for k in ("accuracy", "macro_f1", "loss")}
                               for split in ("validation", "test")}
    return result


def tune(cfg: TuneConfig, *, retrain: bool = False, overwrite: bool = False) -> dict[str, Any]:
    """Run (or resume) the search; write study.db, trials.json, best.yaml (and best/ with `retrain`).
    Returns {"best_value", "best_params", "metric", "trials", "best_config", "retrained"}."""
    optuna = _optuna()
    from tfm_cls.train import train

    ts = cfg.tune
    metric = ts.metric or cfg.base_config().train.best_metric
    run_dir = _prepare_run_dir(cfg, overwrite)
    study = _open_study(optuna, cfg, run_dir, metric)
    finished_states = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    done = len(study.get_trials(deepcopy=False, states=finished_states))
    spent = float(study.user_attrs.get("seconds", 0.0))
    budget = ts.max_minutes * 60 if ts.max_minutes else None
    logger.info("study %s: %d of %d trials finished, %.1f minutes spent (%s)", cfg.name, done, ts.trials, spent / 60,
                run_dir / STUDY_FILE)

    def objective(trial: Any) -> float:
        values = {key: spec.suggest(trial, key) for key, spec in ts.space.items()}
        extra = [*ts.trial_overrides, *_trial_overrides(values),
                 f"name={cfg.name}-trial{trial.number}", f"run_dir={run_dir / TRIALS_DIR / f'{trial.number:03d}'}"]
        if budget is not None:  # a trial may not outlast the search's budget
            left = max((budget - study_seconds()) / 60, 0.05)
            trial_cfg = cfg.base_config(*extra)
            extra.append(f"train.max_minutes={min(trial_cfg.train.max_minutes or left, left)!r}")
        try:
            trial_cfg = cfg.base_config(*extra)
        except ConfigError as err:  # a combination the model refuses (e.g. d_model vs nhead)
            logger.warning("trial %d: %s; pruned", trial.number, err)
            raise optuna.TrialPruned(str(err)) from err
        logger.info("trial %d: %s", trial.number, " ".join(_trial_overrides(values)))
        metrics = train(trial_cfg, overwrite=True, sinks=[PruningSink(trial, metric)], score_test=False)
        return float(metrics["validation"][metric])

    session_start = time.perf_counter()

    def study_seconds() -> float:
        return spent + time.perf_counter() - session_start

    def after_trial(study: Any, trial: Any) -> None:
        study.set_user_attr("seconds", study_seconds())
        write_json(run_dir / TRIALS_FILE, _summary(study))
        if budget is not None and study_seconds() >= budget:
            logger.info("tune budget of %s minutes spent", ts.max_minutes)
            study.stop()

    remaining = ts.trials - done
    if remaining > 0 and (budget is None or study_seconds() < budget):
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # our own lines say what happens
        study.optimize(objective, n_trials=remaining, callbacks=[after_trial], catch=(TfmClsError,))
    write_json(run_dir / TRIALS_FILE, _summary(study))
    return _best(optuna, cfg, study, run_dir, metric, retrain, finished_states)


def check_space(cfg: TuneConfig) -> list[str]:
    """The dotted overrides every range bound would give (each checked against ClassifierConfig
    by `apply_overrides`): a config test walks the presets with it."""
    checked = []
    for key, spec in cfg.tune.space.items():
        for value in spec.choices if spec.choices is not None else (spec.low, spec.high):
            item = _trial_overrides({key: value})[0]
            apply_overrides({}, [item], ClassifierConfig)
            checked.append(item)
    return checked
