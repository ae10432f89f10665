"""Named config presets, installed with the package as `tfm_cls.configs` (see tfm_cls.config)."""
