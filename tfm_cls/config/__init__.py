"""Configuration: nested dataclasses <-> YAML <-> dotted CLI overrides, strict and type-checked.

    loader.py   the generic half: from_dict / to_dict, overrides, presets, reading and merging YAML,
                load_config / save_config, deprecated keys (renamed_keys); imports no schema
    schema.py   ClassifierConfig (`tfm-cls train`) and the sections the other jobs share: DataConfig,
                TokenizerConfig, InferenceConfig, ModelConfig, TrainConfig, RunConfig, ... (the wide
                branch's WideConfig is its own: tfm_cls.config.wide)

Everything is importable from here (`from tfm_cls.config import ClassifierConfig, load_config`).
"""

from tfm_cls.config.loader import (
    apply_overrides,
    config_paths,
    from_dict,
    load_config,
    merge_config,
    migrate_keys,
    presets,
    presets_root,
    require,
    resolve_config_file,
    save_config,
    to_dict,
)
from tfm_cls.config.schema import (
    BBC_CORPUS,
    CLASSIFIER_RENAMES,
    LONG_TEXT_RENAMES,
    TASK_METRICS,
    ClassifierConfig,
    ContrastiveConfig,
    DataConfig,
    InferenceConfig,
    ModelConfig,
    MultiLabelConfig,
    RegressionConfig,
    RunConfig,
    TokenizerConfig,
    TrainConfig,
    WideConfig,
)
from tfm_cls.errors import ConfigError

__all__ = [
    "BBC_CORPUS",
    "CLASSIFIER_RENAMES",
    "LONG_TEXT_RENAMES",
    "TASK_METRICS",
    "ClassifierConfig",
    "ContrastiveConfig",
    "ConfigError",
    "DataConfig",
    "InferenceConfig",
    "ModelConfig",
    "MultiLabelConfig",
    "RegressionConfig",
    "RunConfig",
    "TokenizerConfig",
    "TrainConfig",
    "WideConfig",
    "apply_overrides",
    "config_paths",
    "from_dict",
    "load_config",
    "merge_config",
    "migrate_keys",
    "presets",
    "presets_root",
    "require",
    "resolve_config_file",
    "save_config",
    "to_dict",
]
