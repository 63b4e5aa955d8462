"""The mock AG-UI backend behind ``agui_pipes.testing.MockServer`` and ``agui-pipes mock``.

A fake agent for frontend tests: scenario files (``scenarios``) played through
the run driver (``script``), recorded runs replayed (``replay``) or recorded
through a proxy (``record``), faults planted on top (``faults``), all served
by one ASGI app (``app``) that ``server`` runs on a port. It is a server, so
the package sits in the serving layer although its public names are the
testing kit's (docs/architecture.md).
"""
