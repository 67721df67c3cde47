"""What helps a user write their settings: `init` (the starter file and the survey of recent
traces), `metrics` (the catalog), `langfuse import-evaluators`."""
