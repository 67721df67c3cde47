"""The OpenAI-compatible LLM providers, below both the judge (chat) and the embeddings (``/embeddings``).

One endpoint's client (``client.py``: the ``openai`` async client, log-safe error descriptions; over the
SDK's aiohttp transport with one connection pool per provider, ``transport.py``), its retry policy
(``retry.py``, on the shared trace_scorer.runtime.retry), its bounds on requests in flight and per minute with a
pause after a 429 (``limits.py``), token and cost accounting (``usage.py``), and the providers' API keys
and names (``keys.py``). Importing this package does not load openai (``client.py``, ``transport.py`` and
``retry.py`` do, when a judge or an embedder is built).
"""

from trace_scorer.providers.keys import check_provider_names, provider_api_key
from trace_scorer.providers.limits import ProviderLimits
from trace_scorer.providers.usage import Usage, UsageLedger

__all__ = ["ProviderLimits", "Usage", "UsageLedger", "check_provider_names", "provider_api_key"]
