"""The whole tree: the Hypothesis profiles, and the fixtures shared across folders (:mod:`tests.support`).

Tiers: ``tests/unit`` (no sockets, no processes), ``tests/integration`` (fakes, in-process servers),
``tests/e2e`` (real worker processes). Shared helpers live in ``tests/support``, nowhere else.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings as hypothesis_settings

# The helpers' own asserts (contract checks, score checks) report like the tests' asserts.
pytest.register_assert_rewrite("tests.support")

# Fixtures used in more than one folder (pytest reads ``pytest_plugins`` only in this root conftest).
pytest_plugins = ["tests.support.fixtures", "tests.support.postgres", "tests.support.standin_fixtures"]

# Property tests: many examples in CI, fewer on a developer's machine.
hypothesis_settings.register_profile("ci", max_examples=1000, deadline=None)
hypothesis_settings.register_profile("dev", max_examples=200, deadline=None)
hypothesis_settings.load_profile("ci" if os.environ.get("CI") else "dev")
