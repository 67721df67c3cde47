"""Fixture of the core tests: the default registry plus the toy metrics."""

from __future__ import annotations

import pytest

from tests.support.toy_metrics import TOY_METRICS
from trace_scorer.metrics.registry import MetricRegistry, default_registry


@pytest.fixture
def toy_registry() -> MetricRegistry:
    return default_registry().with_classes(*TOY_METRICS)
