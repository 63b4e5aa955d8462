"""The public API a newcomer meets: names, lazy imports, and the typing of user code."""
