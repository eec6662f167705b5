"""Deprecated: :mod:`multiverse.estimators` (the pure estimators) and
:mod:`multiverse.inference` (the study's drawn universes and their predictors), 0.3.0.
This module re-exports both and is removed in 0.4.0 (CHANGELOG)."""

import warnings

from multiverse.estimators import *  # noqa: F401,F403  (the deprecated names)
from multiverse.inference import *  # noqa: F401,F403  (the deprecated names)

warnings.warn("multiverse.design_based is deprecated: import multiverse.estimators or multiverse.inference "
              "(removed in 0.4.0)", DeprecationWarning, stacklevel=2)
