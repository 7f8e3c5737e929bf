"""The conformance suite: each runtime end to end against its real CLI and a fake model API.

Every test here is marked ``realcli`` (and ``slow``) and is skipped, with the reason, when the
pinned CLIs are not installed: ``.ci/run`` installs them (``.ci/clis.txt``) and runs
``python -m pytest -m realcli`` once, in a loopback-only network namespace where it can.
"""

from __future__ import annotations
