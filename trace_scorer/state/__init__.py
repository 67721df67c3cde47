"""The worker's state — watermarks, the ledger, failures, dataset runs and their results — in an SQLite
file (the default: one process) or in PostgreSQL (``[state] url``: shared by every replica).

- :mod:`.store`: :class:`StateStore`, the semantics, written once for both backends.
- :mod:`.sqlite`, :mod:`.postgres`: the backends (opening, locking, migrating, transactions).
- :mod:`.schema`: the migration steps of both and :data:`SCHEMA_VERSION`; :mod:`.opening`:
  :func:`open_state` from ``[state]``, :func:`check_state`; :mod:`.transfer`: copying a state into another.
"""

from trace_scorer.state.backend import Backend, StateError, StateInUse
from trace_scorer.state.opening import StateCheck, check_state, open_state
from trace_scorer.state.schema import MIGRATIONS, SCHEMA_VERSION, TABLES, Migration, Table
from trace_scorer.state.store import Failure, RunState, StateStore, StoredResult

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "TABLES",
    "Backend",
    "Failure",
    "Migration",
    "RunState",
    "StateCheck",
    "StateError",
    "StateInUse",
    "StateStore",
    "StoredResult",
    "Table",
    "check_state",
    "open_state",
]
