"""A browser inspector for AG-UI streams: timeline, events, pipeline and result views.

``agui-pipes inspect FILE`` serves one recorded stream; ``agui-pipes serve
--inspect`` serves the runs a server streamed, live. The page (static assets in
``static/``) reads everything from a JSON API documented in docs/inspector.md, so
other tools can use the same data.

* ``InspectedRun`` — the model of one stream the API serves (build it from wire
  events with ``InspectedRun.build``, or grow it with ``add``/``close``);
* ``inspector_app`` — the Starlette app (the ``server`` extra) for one run or a
  ``RecentRuns`` ring; ``with_inspector`` mounts it under a prefix of another app;
* ``SendTarget`` — an AG-UI endpoint's URL the page's runs are sent to
  (``agui-pipes inspect --target URL``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # What type checkers see; `_EXPORTS` below is what runs (a test keeps them equal).
    from ._app import RecentRuns as RecentRuns
    from ._app import inspector_app as inspector_app
    from ._app import with_inspector as with_inspector
    from ._model import NOT_AN_EVENT as NOT_AN_EVENT
    from ._model import InspectedRun as InspectedRun
    from ._target import SendTarget as SendTarget
else:
    from .._lazy import attach as _attach

    _EXPORTS = {
        "InspectedRun": "._model",
        "NOT_AN_EVENT": "._model",
        "RecentRuns": "._app",
        "SendTarget": "._target",
        "inspector_app": "._app",
        "with_inspector": "._app",
    }
    __getattr__, __dir__ = _attach(
        __name__, _EXPORTS, extras={"._app": "pip install 'agui-pipes[server]'"}
    )
    __all__ = [*_EXPORTS]
