"""Hostile inputs through the public surface (CLI, gateway), each in a child process.

Every case must end the documented way — exit code or RUN_ERROR code, a clear
message, no traceback — within a memory ceiling. See ``_harness.py``.
"""
