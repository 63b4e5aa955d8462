"""The AG-UI protocol model, reference implementation: events in, events out, and their rules.

Building events without a second validation (``construct``), reading payloads
(``decode``, with the pre-1.0 shapes in ``legacy`` / ``legacy_events``), writing
them (``encode``) and expanding ``*_CHUNK`` shorthand (``chunks``). The ordering
rules live beside it in the public ``agui_pipes.verify``; folding a stream into
what a client holds is ``agui_pipes._consumer``, a layer up. Built on
``agui_pipes._foundation`` only; never imports the fast path, a stage or anything
that serves.
"""
