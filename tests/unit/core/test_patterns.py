"""User-supplied run-name patterns: linear time (RE2), refused at start-up when RE2 cannot take them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trace_scorer.config.targets import TargetSettings
from trace_scorer.data.patterns import SafePattern


def test_a_catastrophic_pattern_answers_at_once() -> None:
    """``(a+)+$`` backtracks exponentially in Python's ``re`` (11 s on a 26-character name, the event loop
    held); RE2 answers in time linear in the name, so this returns instead of hanging the test."""
    pattern = SafePattern("(a+)+$")
    assert not pattern.search("a" * 50_000 + "b")
    assert pattern.search("run-aaa")


def test_patterns_search_anywhere_like_re_search() -> None:
    assert SafePattern("^nightly-").search("nightly-42") and not SafePattern("^nightly-").search("a-nightly-42")
    assert SafePattern("v(1|2)$").search("agent-v2")


@pytest.mark.parametrize("pattern", [r"(?<=a)b", r"(a)\1"])
def test_a_pattern_that_needs_backtracking_is_a_configuration_error(pattern: str) -> None:
    with pytest.raises(ValidationError, match=r"run_name_pattern: .*RE2.*back-references and look-around"):
        TargetSettings.model_validate(
            {"name": "b", "source": "dataset_runs", "datasets": ["d"], "run_name_pattern": pattern,
             "metrics": [{"metric": "rouge"}]}
        )
