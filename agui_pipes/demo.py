"""A scripted demo agent that exercises every kind of event a real agent produces.

``agui-pipes demo`` runs it through the run driver and a default chain, and
``agui-pipes serve --demo`` serves it; tests use it as a realistic, fully
deterministic event source. No network, no model, no API key: the "answers"
are written out below, but the *shape* of the run is what a real planner
agent emits —

* reasoning before it acts,
* streamed assistant text (word by word),
* tool calls inside a step, including an *internal* one (``internal_price_lookup``)
  that the default chain hides from the client,
* a delegated tool call answered by a subagent, which itself calls a nested
  subagent (with its own reasoning, text and tool call),
* shared state published as it changes (a snapshot, then JSON Patch deltas).

The default chain (``DEFAULT_CHAIN``, YAML) hides the internal tool and
promotes the place-search result into the shared state at ``/places``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import anyio
from ag_ui.core import RunAgentInput
from pydantic import BaseModel, Field

from ._lazy import public_dir
from .driver import Agent, Emitter, RunContext, RunOutcome

__all__ = [
    "DEFAULT_CHAIN",
    "DemoAgent",
    "TripState",
    "demo_input",
]
__dir__ = public_dir(__all__)

DEFAULT_CHAIN = """\
# The chain `agui-pipes demo` runs the demo agent through.
version: 1
transformers:
  # Internal tools (the price lookup) are implementation details: the client never
  # sees them, not even in snapshots.
  - type: filter_tool_calls
    deny: ["internal_*"]
  # Publish the places the search found into the shared state, at /places.
  - type: tool_result_to_state
    tool: search_places
    mode: at
    pointer: /places
"""

_PLACES: dict[str, list[dict[str, Any]]] = {
    "default": [
        {"name": "Old town walking tour", "kind": "walk", "hours": 3},
        {"name": "Modern art museum", "kind": "museum", "hours": 2},
        {"name": "Riverside food market", "kind": "food", "hours": 2},
        {"name": "Sunset viewpoint", "kind": "view", "hours": 1},
    ],
}


class TripState(BaseModel):
    """The shared state of a demo run: what the planner knows so far."""

    city: str = ""
    status: str = "idle"
    places: list[dict[str, Any]] = Field(default_factory=list)
    itinerary: dict[str, list[str]] = Field(default_factory=dict)
    budget: dict[str, int] = Field(default_factory=lambda: {"limit": 300, "estimate": 0})


def demo_input(
    message: str = "Plan me a weekend in Lisbon, please.",
    *,
    thread_id: str = "demo-thread",
    run_id: str = "demo-run",
) -> RunAgentInput:
    """A ``RunAgentInput`` with one user message, for running the demo agent."""
    return RunAgentInput.model_validate(
        {
            "threadId": thread_id,
            "runId": run_id,
            "state": None,
            "messages": [{"id": f"{run_id}-user", "role": "user", "content": message}],
            "tools": [],
            "context": [],
            "forwardedProps": None,
        }
    )


def _city(ctx: RunContext[TripState]) -> str:
    """The city named in the last user message ("... in Porto"), Lisbon by default."""
    for message in reversed(ctx.messages):
        content = getattr(message, "content", None)
        if getattr(message, "role", None) == "user" and isinstance(content, str):
            found = re.search(r"\b(?:in|to|around)\s+([A-Z][\w-]+)", content)
            if found:
                return found.group(1)
    return "Lisbon"


def _words(text: str) -> Sequence[str]:
    """Split text into streaming deltas that concatenate back to exactly ``text``."""
    return re.findall(r"\S+\s*|\s+", text)


class DemoAgent(Agent[TripState]):
    """A trip planner that follows a fixed script (see the module docstring).

    ``pace`` is the pause between streamed words, in seconds: 0 (the default)
    for tests and servers, a few hundredths to watch it stream in a terminal.
    """

    def __init__(self, *, pace: float = 0.0) -> None:
        self.pace = pace

    async def _stream(self, emitter: Emitter[TripState], text: str) -> None:
        with emitter.assistant_message() as message:
            for word in _words(text):
                message.delta(word)
                if self.pace:
                    await anyio.sleep(self.pace)

    async def _think(self, emitter: Emitter[TripState], text: str) -> None:
        with emitter.reasoning() as span, span.message() as thought:
            for word in _words(text):
                thought.delta(word)
                if self.pace:
                    await anyio.sleep(self.pace / 2)

    async def run(self, ctx: RunContext[TripState]) -> RunOutcome:
        city = _city(ctx)
        places = _PLACES.get(city.lower(), _PLACES["default"])

        await self._think(
            ctx,
            f"The user wants a weekend in {city}. I should find places worth a visit, check "
            "what they cost, ask a local expert about the weather, then split the days.",
        )

        def start(state: TripState) -> None:
            state.city = city
            state.status = "researching"

        ctx.update_state(start)
        await self._stream(ctx, f"Happy to! Let me look into {city} for you.")

        with ctx.step("research"):
            search = ctx.tool_call("search_places")
            search.args_json({"city": city, "limit": len(places)})
            search.result_json(places)

            prices = ctx.tool_call("internal_price_lookup")
            prices.args_json({"places": [p["name"] for p in places]})
            prices.result_json({"total_eur": 85, "source": "internal-pricing-v3"})

        def found(state: TripState) -> None:
            state.places = places
            state.budget = {**state.budget, "estimate": 85}

        ctx.update_state(found)

        ask = ctx.tool_call("ask_local_expert")
        ask.args_json({"question": f"What will the weather be like in {city} this weekend?"})
        ask.end()
        with ctx.subagent(
            "local_expert",
            description=f"Knows {city} well",
            parent_tool_call_id=ask.id,
        ) as expert:
            await self._think(
                expert, "Outdoor plans depend on the forecast; ask the weather agent."
            )
            with expert.subagent("weather", description="Reads forecasts") as weather:
                forecast = weather.tool_call("get_forecast")
                forecast.args_json({"city": city, "days": ["saturday", "sunday"]})
                forecast.result_json({"saturday": "sunny, 24°C", "sunday": "showers, 19°C"})
                await self._stream(weather, "Saturday looks sunny; expect showers on Sunday.")
                weather.finish_with({"saturday": "sunny", "sunday": "showers"})
            await self._stream(
                expert, "Do the outdoor things on Saturday and keep Sunday for indoor ones."
            )
            expert.finish_with({"advice": "outdoors on Saturday, indoors on Sunday"})
        ask.result_json({"advice": "outdoors on Saturday, indoors on Sunday"})

        outdoor = [p["name"] for p in places if p["kind"] in ("walk", "view")]
        indoor = [p["name"] for p in places if p["kind"] not in ("walk", "view")]

        def planned(state: TripState) -> None:
            state.itinerary = {"saturday": outdoor, "sunday": indoor}
            state.status = "ready"

        ctx.update_state(planned)
        await self._stream(
            ctx,
            f"Here is your weekend in {city}. Saturday (sunny): {', '.join(outdoor)}. "
            f"Sunday (showers): {', '.join(indoor)}. Estimated cost: about 85 EUR, well "
            "within your budget.",
        )
        return RunOutcome.success()
