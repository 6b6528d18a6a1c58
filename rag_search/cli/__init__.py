"""The `local-rag` command line."""
