"""Scoring files offline: the one path of ``score``, and of ``compare`` and ``calibrate`` on files.

``read`` reads input files (samples, exported observation rows, experiment items), a part at a time;
``targets`` chooses the target (the configured one, or the no-config rule); ``parts`` reads and scores a
part in this process; ``jobs`` spreads parts over processes; ``scoring`` puts them together for local
and judged targets alike; ``groups`` scores run-level groups; ``progress`` is the one progress display;
``report`` prints the table or the JSON lines; ``command`` is what the command line calls.

Nothing is imported here: each command imports the modules it uses (start-up time, issue 23).
"""
