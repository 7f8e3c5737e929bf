"""pytest-maestro: run an implementation plan as a pytest session, one item per phase."""

from __future__ import annotations

import sys

__version__ = "0.1.0"

if "pytest" in sys.modules:  # loaded as a plugin: the rest of the package imported as Python does
    from ._compat import leave_to_python

    leave_to_python(__name__)
