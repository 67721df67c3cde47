"""Annotation queues, for ``trace-scorer calibrate --push-to-queue``: the traces a queue already holds
(``GET /api/public/annotation-queues/{queueId}/items``, page/limit) and adding one
(``POST /api/public/annotation-queues/{queueId}/items``, ``{"objectId", "objectType": "TRACE"}``).

The worker never uses them: these endpoints are in none of the worker's route tuples of :mod:`.endpoints`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from trace_scorer.errors import UserError
from trace_scorer.langfuse.errors import LangfuseNotFoundError, LangfuseResponseError
from trace_scorer.langfuse.http.endpoints import QUEUE_ITEM_CREATE, QUEUE_ITEMS
from trace_scorer.langfuse.http.transport import Transport

#: Items per page read.
PAGE_LIMIT = 100


def _path(queue_id: str) -> str:
    return f"/api/public/annotation-queues/{quote(queue_id, safe='')}/items"


def _missing(queue_id: str) -> UserError:
    return UserError(f"annotation queue {queue_id!r} not found in this Langfuse project (its id, not its name)")


@dataclass(frozen=True)
class QueueItem:
    """One item of a queue: the object people are asked to label (``TRACE``, ``OBSERVATION``, ``SESSION``)."""

    object_id: str
    object_type: str
    status: str


async def queue_items(transport: Transport, queue_id: str) -> list[QueueItem]:
    """Every item of the queue, pending or completed, page by page (newest first, as Langfuse lists them)."""
    found: list[QueueItem] = []
    page = 1
    while True:
        try:
            answer = await transport.plain(QUEUE_ITEMS, _path(queue_id), params={"page": page, "limit": PAGE_LIMIT})
        except LangfuseNotFoundError:
            raise _missing(queue_id) from None
        body = answer.body
        if not isinstance(body, Mapping) or not isinstance(body.get("data"), list):
            raise LangfuseResponseError(endpoint=QUEUE_ITEMS.label, detail="no data list in the answer")
        found.extend(
            QueueItem(str(item["objectId"]), str(item.get("objectType", "TRACE")), str(item.get("status", "")))
            for item in body["data"]
            if isinstance(item, Mapping) and "objectId" in item
        )
        meta = body.get("meta")
        pages = meta.get("totalPages") if isinstance(meta, Mapping) else None
        if not body["data"] or not isinstance(pages, int) or page >= pages:
            return found
        page += 1


async def queued_objects(transport: Transport, queue_id: str) -> set[str]:
    """The object ids (traces, observations, sessions) the queue holds, pending or completed."""
    return {item.object_id for item in await queue_items(transport, queue_id)}


async def add_trace(transport: Transport, queue_id: str, trace_id: str) -> None:
    """Put one trace into the queue (pending), once.

    The POST is not idempotent — Langfuse creates an item each time, and the request has no id the server
    would keep (``objectId``, ``objectType``, ``status`` only) — so an attempt that failed on the way back (a
    timeout, a dropped connection, a 5xx from a proxy) may have created the item: before each resend the
    queue's items are read again, and a trace the queue now holds is not sent again."""
    attempts = 0

    async def attempt() -> None:
        nonlocal attempts
        attempts += 1
        if attempts > 1 and trace_id in await queued_objects(transport, queue_id):
            return  # a lost attempt created it
        try:
            await transport.plain(
                QUEUE_ITEM_CREATE, _path(queue_id), body={"objectId": trace_id, "objectType": "TRACE"}, retry=False
            )
        except LangfuseNotFoundError:
            raise _missing(queue_id) from None

    await transport.retried(QUEUE_ITEM_CREATE, attempt)
