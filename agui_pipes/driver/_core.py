"""Per-run bookkeeping shared by the context and every handle made from it.

Kept apart from the handles so that a handle is a few slots (a reference to
this core and its attribution tag) and creating one costs next to nothing.
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import RunAgentInput
from pydantic import BaseModel, ValidationError

from .._foundation.principal import ANONYMOUS, Principal
from ._errors import RunError
from ._pipeline import Pipeline

__all__ = ["RunCore", "to_json"]


def to_json(value: Any, what: str) -> Any:
    """A detached plain-JSON copy of ``value`` (pydantic models dumped by alias).

    Raises ``RunError`` SERIALIZATION naming ``what`` when the value has no JSON
    form (an object, a set, NaN...).
    """
    try:
        if isinstance(value, BaseModel):
            return value.model_dump(mode="json", by_alias=True)
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise RunError.serialization(
            f"{what} does not convert to JSON: {exc}; use dicts, lists, strings, numbers, "
            "booleans and None (or a pydantic model)"
        ) from exc
    except Exception as exc:  # pydantic's serializer errors
        raise RunError.serialization(f"{what} does not convert to JSON: {exc}") from exc


class RunCore:
    """What one run shares: its input, emission pipeline, id counters, state, open scopes."""

    __slots__ = (
        "input",
        "next_call",
        "next_msg",
        "next_sub",
        "open_scopes",
        "pipeline",
        "principal",
        "run_id",
        "state",
        "state_model",
    )

    def __init__(
        self,
        run_input: RunAgentInput,
        pipeline: Pipeline,
        state_model: type[BaseModel] | None,
        principal: Principal = ANONYMOUS,
    ) -> None:
        self.input = run_input
        self.principal = principal
        self.run_id = run_input.run_id
        self.pipeline = pipeline
        self.state_model = state_model
        self.state: Any = None
        self.next_msg = 0
        self.next_call = 0
        self.next_sub = 0
        self.open_scopes: dict[str, str] = {}
        """Subagent id -> name, for every scope that was started and not yet ended."""

    def message_id(self) -> str:
        self.next_msg += 1
        return f"{self.run_id}-msg-{self.next_msg}"

    def call_id(self) -> str:
        self.next_call += 1
        return f"{self.run_id}-call-{self.next_call}"

    def subagent_id(self) -> str:
        self.next_sub += 1
        return f"{self.run_id}-sub-{self.next_sub}"

    # -- state ------------------------------------------------------------------

    def decode_state(self) -> None:
        """Turn ``input.state`` into the agent's state value; SERIALIZATION on failure."""
        raw = self.input.state
        model = self.state_model
        if model is None:
            self.state = raw
            return
        try:
            self.state = model() if raw is None else model.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top level)"
            problem = (
                "is missing and the model cannot be built empty"
                if raw is None
                else (f"does not decode into {model.__name__}")
            )
            raise RunError.serialization(
                f"the run's input state {problem}: {exc.error_count()} problem(s), first at "
                f"{where}: {first['msg']}; send state matching {model.__name__} or give its "
                "fields defaults"
            ) from exc

    def coerce_state(self, value: Any) -> Any:
        """Check a new state value against the model (if any); SERIALIZATION on mismatch."""
        model = self.state_model
        if model is None or isinstance(value, model):
            return value
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            raise RunError.serialization(
                f"the new state does not fit {model.__name__}: {exc.errors()[0]['msg']} at "
                f"{exc.errors()[0]['loc']}; pass a {model.__name__} instance"
            ) from exc
