"""Foundations: what every layer of agui_pipes uses and nothing of ours is imported by.

The exception families (``errors``), JSON bounds (``limits``, ``limits_scope``),
JSON text and JSON Patch (``json``, ``json_patch``), which event loop runs in this
thread (``loops``) and the served request's trace headers (``trace_context``).
Nothing here imports another subpackage of agui_pipes; ``tests/api/test_layers.py``
holds it to that.
"""
