"""``check``'s probe of the judge models (judge/probe.py) against a scripted endpoint: the mode that works,
the latency, warnings for a model the server does not list or an answer naming another model, and the
reason when a model cannot work."""

from __future__ import annotations

from typing import Any

import httpx
import respx

from tests.support.judge import JudgeFactory, ScriptedLLM, completion, error, provider
from trace_scorer.judge.probe import probe_models

LLAMA_CPP_500 = {"error": {"message": "response_format.type: Input should be 'text' or 'json_object'"}}


def llama_cpp(body: dict[str, Any]) -> httpx.Response | str:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return httpx.Response(500, json=LLAMA_CPP_500)
    return '{"ok": 1}'


async def test_the_probe_reports_the_mode_that_works_and_remembers_it(
    llm: ScriptedLLM, make_judge: JudgeFactory
) -> None:
    llm.on("smollm2", llama_cpp)
    judge = await make_judge(provider("p", "smollm2"))
    [result] = await probe_models(judge, None)
    assert result.ok and result.mode == "json_object_schema" and result.seconds is not None
    assert result.warnings == ()
    assert judge.structured_mode("p/smollm2") == "json_object_schema"  # the metrics start there
    assert len(llm.requests) == 2 and llm.requests[0]["max_tokens"] <= 32


async def test_a_model_the_server_does_not_list_is_a_warning(make_judge: JudgeFactory) -> None:
    scripted = ScriptedLLM().on("smollm2-typo", '{"ok": 1}')
    with respx.mock(assert_all_called=False) as mock:
        mock.post(url__regex=r".*/chat/completions$").mock(side_effect=scripted)
        mock.get(url__regex=r".*/models$").mock(
            return_value=httpx.Response(200, json={"object": "list", "data": [{"id": "smollm2", "object": "model"}]})
        )
        judge = await make_judge(provider("p", "smollm2-typo"))
        [result] = await probe_models(judge, None)
    assert result.ok  # it answered (llama.cpp serves any name with its default model)…
    assert any("does not list 'smollm2-typo'" in w for w in result.warnings)  # …but only the listing tells


async def test_an_answer_naming_another_model_is_a_warning(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    llm.on("gpt-4o", completion('{"ok": 1}', model="gpt-4o-mini-2024-07-18"))
    judge = await make_judge(provider("p", "gpt-4o"))
    [result] = await probe_models(judge, None)
    assert result.ok and any("names model 'gpt-4o-mini-2024-07-18'" in w for w in result.warnings)


async def test_a_model_that_cannot_work_says_why(llm: ScriptedLLM, make_judge: JudgeFactory) -> None:
    llm.on("a", error(401, "invalid api key"))
    llm.on("b", error(400, "unsupported: response_format"))
    judge = await make_judge(provider("p", "a", "b"))
    first, second = await probe_models(judge, None)
    assert not first.ok and first.reason is not None and "HTTP 401" in first.reason
    # stepped down past the response_format modes; vLLM's structured_outputs got the same 400, which does
    # not name it: an ordinary bad request, reported
    assert not second.ok and second.reason is not None and "HTTP 400" in second.reason
    assert judge.structured_mode("p/b") == "vllm_structured"
