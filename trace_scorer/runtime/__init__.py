"""How the process runs: logging, progress signals, the shared retry loop, plug-ins by entry
point, optional extras."""
