"""``trace-scorer compare``: is a candidate run better than its baseline, by how much, how sure, and
which items got worse (docs/compare.md). Statistics in :mod:`.stats`, one comparison in :mod:`.analysis`,
the runs' values from sample files (:mod:`.offline`), Langfuse (:mod:`.langfuse_runs`) or the worker's
state (:mod:`.worker`); output as a table (:mod:`.terminal`), JSON, or an HTML report (:mod:`.html`)."""
