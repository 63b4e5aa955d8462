"""``agui-pipes verify`` with no configuration agrees with every official conformance case.

Each case's stream is verified as a file, with no flag: the exit status is the case's
outcome, and for an accepted stream ``--result``'s messages and state match the case
(subset match, as the corpus README defines) and the warnings it names are on stderr.
The era cases are included: the reference client's always-on boundary (retired
``THINKING_*`` events translated into reasoning, binary parts upgraded) is verify's
default too.

Two expectations depend on the client's configuration rather than on the stream: the
``BackwardCompatibility_0_0_57`` normalisation that drops subagent events applies only
when the client is configured with that peer ceiling, and the 0.0.39 case's warning is
the outgoing request's. For those two only the outcome is checked here;
tests/interop/test_conformance.py runs them with the peer named.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agui_pipes._cli import main
from tests.interop.test_conformance import CASES, INVERTED, subset_match

PEER_CONFIGURED = {
    "era-0-0-57-subagent-dropped-with-warning": "the client's maxProtocolVersion 0.0.57",
    "era-0-0-39-flattens-content": "the warning is the 0.0.39 request shim's",
}


def test_the_corpus_is_all_here() -> None:
    assert len(CASES) == 56
    assert set(PEER_CONFIGURED) <= {p.stem for p in CASES}


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_verify_agrees_with_the_case_with_no_configuration(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = json.loads(path.read_text())
    expect = case["expect"]
    code = main(["verify", "--result", str(path)])
    out, err = capsys.readouterr()
    rejected = expect["outcome"] == "failed" or case["name"] in INVERTED
    assert code == (1 if rejected else 0), err
    if rejected:
        if expect.get("errorContains"):
            assert expect["errorContains"] in err
        return
    if case["name"] in PEER_CONFIGURED:
        return
    result = json.loads(out)
    if "messageCount" in expect:
        assert len(result["messages"]) == expect["messageCount"], result["messages"]
    if "messages" in expect:
        subset_match(expect["messages"], result["messages"], "messages")
    if "state" in expect:
        subset_match(expect["state"], result["state"], "state")
    if "runError" in expect:
        assert result["runError"] is not None
        if isinstance(expect["runError"], str):
            assert expect["runError"] in result["runError"]["message"]
    else:
        assert result["runError"] is None
    if expect.get("noWarnings"):
        assert err == ""
    for fragment in expect.get("warnings", ()):
        assert fragment in err, (fragment, err)
