"""A browser inspector for AG-UI streams: timeline, events, pipeline and result views.

``agui-pipes inspect FILE`` serves one recorded stream; ``agui-pipes serve
--inspect`` serves the runs a server streamed, live. The page (static assets in
``static/``) reads everything from a JSON API documented in docs/inspector.md, so
other tools can use the same data.

* ``InspectedRun`` — the model of one stream the API serves (build it from wire
  events with ``InspectedRun.build``, or grow it with ``add``/``close``);
* ``inspector_app`` — the Starlette app (the ``server`` extra) for one run or a
  ``RecentRuns`` ring; ``with_inspector`` mounts it under a prefix of another app.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._app import RecentRuns, inspector_app, with_inspector
    from ._model import NOT_AN_EVENT, InspectedRun
else:
    from .._lazy import attach

    __getattr__, __dir__ = attach(
        __name__,
        {
            "InspectedRun": "._model",
            "NOT_AN_EVENT": "._model",
            "RecentRuns": "._app",
            "inspector_app": "._app",
            "with_inspector": "._app",
        },
        extras={"._app": "pip install 'agui-pipes[server]'"},
    )

__all__ = ["NOT_AN_EVENT", "InspectedRun", "RecentRuns", "inspector_app", "with_inspector"]
