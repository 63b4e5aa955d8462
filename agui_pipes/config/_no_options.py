"""``NoOptions``: the options model of a stage that takes none.

Apart from the other options models because the registry needs it as every
spec's default while ``agui_pipes.config.options`` — thirteen pydantic models,
~10 ms to define — is imported only once a chain names a built-in stage (so
``agui-pipes run`` on a chain of plugins, or of nothing, never pays for it).
It is public as ``agui_pipes.config.options.NoOptions``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["NoOptions"]


class NoOptions(BaseModel):
    """A stage that takes no options."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


NoOptions.__module__ = "agui_pipes.config.options"
