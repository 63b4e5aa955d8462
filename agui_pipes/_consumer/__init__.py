"""The consumer side: a stream read as an AG-UI 1.0 client reads it, and what it adds up to.

``consume`` (``Consumer``, ``consume``, ``fold``: decode, the compatibility
boundary, chunk expansion, verification and application into a ``RunResult``),
``history`` (a thread's runs folded into one short run) and ``findings`` (every
finding of a stream, not only the first, for ``verify --all``). It sits above
the stages because the consumer pipeline runs one: the ``compat`` stage, the
reference client's always-on compatibility boundary.
"""
