"""Every Langfuse operation the adapter uses: one label per operation for counters, logs and tests.

``legacy`` marks the v3-only endpoints the ``langfuse`` 5.x package no longer models (the stand-in checks
their answers against its own shapes: ``standins/contract/legacy.py``). Every request, of either
generation, goes through ``Transport.plain``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Endpoint:
    method: str
    #: The path template as the OpenAPI file writes it (low cardinality: fine as a metrics label).
    path: str
    legacy: bool = False

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"

    def __str__(self) -> str:
        return self.label


HEALTH = Endpoint("GET", "/api/public/health")
PROJECTS = Endpoint("GET", "/api/public/projects")
SCORE_CONFIGS_LIST = Endpoint("GET", "/api/public/score-configs")
SCORE_CONFIGS_CREATE = Endpoint("POST", "/api/public/score-configs")
OBSERVATIONS_V2 = Endpoint("GET", "/api/public/v2/observations")
EXPERIMENTS = Endpoint("GET", "/api/public/experiments")
EXPERIMENT_ITEMS = Endpoint("GET", "/api/public/experiment-items")
DATASET_GET = Endpoint("GET", "/api/public/v2/datasets/{datasetName}")
#: Every dataset, page/limit: dataset ids → names for `langfuse import-evaluators` (rules filter by id).
DATASETS_LIST = Endpoint("GET", "/api/public/v2/datasets")
DATASET_ITEM_GET = Endpoint("GET", "/api/public/dataset-items/{id}")
SCORES_CREATE = Endpoint("POST", "/api/public/scores")
#: Scores read back (cursor-paged): calibrate's labels, compare's runs.
SCORES_V3 = Endpoint("GET", "/api/public/v3/scores")
#: An annotation queue's items, read and added (calibrate's `--queue` and `--push-to-queue`).
QUEUE_ITEMS = Endpoint("GET", "/api/public/annotation-queues/{queueId}/items")
QUEUE_ITEM_CREATE = Endpoint("POST", "/api/public/annotation-queues/{queueId}/items")
#: Langfuse's evaluators and evaluation rules (the unstable API: 4.x; langfuse/server/evaluators.py).
EVALUATORS = Endpoint("GET", "/api/public/unstable/evaluators")
EVALUATION_RULES = Endpoint("GET", "/api/public/unstable/evaluation-rules")

TRACES_LIST = Endpoint("GET", "/api/public/traces", legacy=True)
TRACE_GET = Endpoint("GET", "/api/public/traces/{traceId}", legacy=True)
#: Observations by time window, page/limit (v1): the bulk read of trace bodies on legacy servers.
OBSERVATIONS_V1 = Endpoint("GET", "/api/public/observations", legacy=True)
DATASET_RUNS = Endpoint("GET", "/api/public/datasets/{datasetName}/runs", legacy=True)
DATASET_RUN_ITEMS = Endpoint("GET", "/api/public/dataset-run-items", legacy=True)
#: One run with all its items (``datasetRunItems``): how 2.x serves a run's items (no ``/dataset-run-items``).
DATASET_RUN = Endpoint("GET", "/api/public/datasets/{datasetName}/runs/{runName}", legacy=True)
INGESTION = Endpoint("POST", "/api/public/ingestion", legacy=True)

#: Used on both generations.
COMMON = (HEALTH, PROJECTS, SCORE_CONFIGS_LIST, SCORE_CONFIGS_CREATE, DATASET_GET, DATASET_ITEM_GET)
#: Used only against v4 servers (also probed at start-up on any server).
V4_ONLY = (OBSERVATIONS_V2, EXPERIMENTS, EXPERIMENT_ITEMS, SCORES_CREATE)
#: Used only against v3 servers.
V3_ONLY = (TRACES_LIST, TRACE_GET, OBSERVATIONS_V1, DATASET_RUNS, DATASET_RUN_ITEMS, INGESTION)
#: Used only against 2.x servers (instead of ``DATASET_RUN_ITEMS``).
V2_ONLY = (DATASET_RUN,)
ALL = COMMON + V4_ONLY + V3_ONLY + V2_ONLY
