"""A LangGraph approval graph whose paused state is in a SQLite file every process opens.

For ``agui-pipes serve --agent tests.integrations._langgraph_approver:ATTR``,
with ``AGUI_PIPES_TEST_CHECKPOINTS`` naming the checkpoint file (every
server process of one deployment is given the same one):

* ``graph`` — the compiled graph, which ``serve`` wraps in ag-ui-langgraph's
  ``LangGraphAgent`` with its defaults: the legacy ``CUSTOM on_interrupt``
  (served with the ``interrupt_bridge`` stage, dialect ``langgraph``);
* ``agent`` — a ``LangGraphAgent`` in its canonical mode
  (``emit_interrupt_outcome=True``).

The one node asks ``interrupt()`` for approval — on a thread whose id starts
with ``expired``, with an ``expiresAt`` already past — and then says what it
got. Its checkpointer is LangGraph's ``AsyncSqliteSaver``, so the run paused
by one process is resumed by another.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import aiosqlite
from ag_ui_langgraph import LangGraphAgent  # type: ignore[import-untyped]
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

__all__ = ["PAST", "agent", "graph"]

PAST = "2020-01-01T00:00:00Z"
"""The ``expiresAt`` of the interrupt asked on an ``expired…`` thread."""


def approve(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
    thread_id = str(config.get("configurable", {}).get("thread_id", ""))
    asked: dict[str, Any] = {"reason": "tool_approval", "message": "Book the flight to Lisbon?"}
    if thread_id.startswith("expired"):
        asked["expiresAt"] = PAST
    answer = interrupt(asked)
    if isinstance(answer, dict) and answer.get("__agui_cancelled__"):
        reply = "Cancelled."
    elif isinstance(answer, dict) and answer.get("approved") is True:
        reply = "Booked."
    else:
        reply = "Not booked."
    return {"messages": [AIMessage(id=f"ai-{len(state['messages'])}", content=reply)]}


def _checkpointer() -> AsyncSqliteSaver:
    """LangGraph's async SQLite saver on the shared file, made while this module imports.

    ``AsyncSqliteSaver`` notes the running loop when it is made (for its
    synchronous methods, which hand their work to that loop from another
    thread) and opens its connection on first use. ``serve`` imports this
    module before its own loop runs, so the saver is made in a loop of its
    own; the graph only calls its async methods, in the server's loop, where
    the connection opens.
    """
    path = os.environ.get("AGUI_PIPES_TEST_CHECKPOINTS")
    if not path:
        raise RuntimeError(
            "set AGUI_PIPES_TEST_CHECKPOINTS to the checkpoint file every server process shares"
        )

    async def made() -> AsyncSqliteSaver:
        return AsyncSqliteSaver(aiosqlite.connect(path))

    return asyncio.run(made())


_builder = StateGraph(MessagesState)
_builder.add_node("approve", approve)
_builder.add_edge(START, "approve")
_builder.add_edge("approve", END)
graph = _builder.compile(checkpointer=_checkpointer(), name="approver")
agent = LangGraphAgent(
    name="approver",
    graph=graph,
    emit_interrupt_outcome=True,
    enable_legacy_on_interrupt_event=False,
)
