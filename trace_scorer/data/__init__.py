"""Values every layer shares: the three outcomes, ISO 8601 times, the observation-row rules and
JSON sent as text, JSON encoded and decoded by orjson where it gives the standard library's values,
user-supplied patterns matched in linear time."""
