"""Regression: activity ownership is per run.

Found by hypothesis in CI (the stream generator emitted it): a subagent's
activity from an earlier run, re-snapshotted untagged with ``replace: false``
in a later run, is recorded by the client as the parent's; the subagent's next
tagged ACTIVITY_DELTA is then an owner mismatch. The official client and our
consumer both reject the recorded stream with the same words, and the
generator now tags such snapshots with the activity's real owner.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agui_pipes import Consumer
from agui_pipes.verify import ProtocolViolation

STREAM = Path(__file__).parents[1] / "data" / "activity-owner-across-runs.json"
WORDS = "does not match the activity 'activity-2' opener's subagent '(the parent agent)'"


def test_our_consumer_rejects_it() -> None:
    consumer = Consumer()
    with pytest.raises(ProtocolViolation, match=r"opener's subagent '\(the parent agent\)'"):
        for event in json.loads(STREAM.read_text()):
            consumer.push(event)
        consumer.finish()


def test_the_official_client_rejects_it_the_same_way(ts_oracle: Any) -> None:
    (result,) = ts_oracle([json.loads(STREAM.read_text())])
    assert result["outcome"] == "failed"
    assert WORDS in result["error"]
