"""Deprecated: :mod:`multiverse.spec` (0.3.0). This module re-exports its names and is
removed in 0.4.0 (CHANGELOG)."""

import warnings

from multiverse.spec import *  # noqa: F401,F403  (the deprecated names, all of them)
from multiverse.spec import __all__  # noqa: F401  (the same list)

warnings.warn("multiverse.config is deprecated: import multiverse.spec (removed in 0.4.0)", DeprecationWarning,
              stacklevel=2)
