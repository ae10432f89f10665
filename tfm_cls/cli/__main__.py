"""`python -m tfm_cls.cli ...` (the Makefile, torchrun, the tests): the `tfm-cls` command."""

import sys

from tfm_cls.cli import main

sys.exit(main())
