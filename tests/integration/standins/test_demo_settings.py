"""The settings file the worker demo writes (``standins/demo.py``) is one the worker accepts, with the
two targets the README describes: a fast guard against the demo drifting from the configuration."""

from __future__ import annotations

from pathlib import Path

from standins.demo import scenario, worker_env, write_settings
from standins.handles import LangfuseHandle, OpenAIHandle
from trace_scorer.config.settings import load_settings


def test_demo_settings_load_with_a_traces_and_a_dataset_runs_target(tmp_path: Path) -> None:
    lf = LangfuseHandle("http://127.0.0.1:1", "pk-lf-demo", "sk-lf-demo")
    llm = OpenAIHandle("http://127.0.0.1:2")
    try:
        path = write_settings(tmp_path, lf, llm, scenario(30, 6))
        settings = load_settings(path, environ=worker_env(lf))
    finally:
        lf.stop()
        llm.stop()
    assert [(t.name, t.source) for t in settings.targets] == [("production", "traces"), ("experiments", "dataset_runs")]
    production, experiments = settings.targets
    assert [m.metric for m in production.metrics] == ["tool_call_accuracy", "rouge", "aspect_critic"]
    assert experiments.datasets == ["agent-bench"]
    assert settings.http.host == "127.0.0.1" and settings.http.port == 0
    assert settings.langfuse.base_url == "http://127.0.0.1:1"
    assert [p.base_url for p in settings.providers] == ["http://127.0.0.1:2/v1"]
