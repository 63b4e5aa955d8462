"""The test suite. One rule for its layout:

Every ``test_*.py`` lives in the folder of the package area it tests (``codecs/``,
``relay/``, ``server/``, ``store/``, ``transformers/``...), or of the concern it
crosses the package for (``docs/``, ``benchmarks/``, ``interop/``, ``hostile/``).
Every folder holding Python files is a package (``__init__.py``), so test modules
are ``tests.<area>.<module>`` and basenames may repeat. Shared helpers are the
``tests/_*.py`` modules, imported by full name (``from tests._servers import serve``);
``conformance/``, ``data/``, ``harness/`` and ``producers/`` hold fixtures and the tools
that make them.
"""
