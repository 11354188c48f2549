"""One module per CLI command; each defines `command` and keeps its heavy imports inside."""
