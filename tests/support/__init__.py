"""Everything the tests share, split by subject. Test modules and conftests import shared helpers only
from here, never from a ``conftest.py`` or another test module.

- :mod:`tests.support.fixtures`: the fixtures used in more than one folder (``make_langfuse``, ``v4``,
  ``v3``, ``clock``, ``sleeps``), registered for the whole tree by ``pytest_plugins`` in ``tests/conftest.py``.
- :mod:`tests.support.clocks`: fake clocks (virtual time, recorded sleeps, a hand-moved clock).
- :mod:`tests.support.langfuse_inprocess`, :mod:`tests.support.langfuse_factories`,
  :mod:`tests.support.langfuse_client`: the Langfuse stand-in in-process (the one model of Langfuse), the
  data and answers a test gives it, a client's settings for it.
- :mod:`tests.support.worker`: the worker harness, realistic traces and targets.
- :mod:`tests.support.judge`, :mod:`tests.support.embeddings`: scripted LLM and embeddings endpoints.
- :mod:`tests.support.metrics`, :mod:`tests.support.toy_metrics`: metric-test helpers, toy metrics.
- :mod:`tests.support.standins`, :mod:`tests.support.e2e`: scenarios and runs on the loopback stand-ins.
- :mod:`tests.support.settings_examples`, :mod:`tests.support.paths`: the shipped examples, the repository root.
"""
