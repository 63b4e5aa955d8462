"""Every finding in a stream, not only the first: what ``agui-pipes verify --all`` reports.

A :class:`~agui_pipes.Consumer` stops at the first violation, as a client must.
A validator in CI wants the whole list. :class:`FindingCollector` runs the same
consumer pipeline — decode, chunk expansion, verification, fold — but records a
violation and goes on, with one recovery rule: **the offending event is treated
as never sent**. The verifier, the chunk expander and the fold leave their state
unchanged when they refuse an event, so what follows is judged against the
stream without it, and one mistake is reported once, not as a cascade. (One
cascade is cut on purpose: when a run's RUN_FINISHED or RUN_ERROR was refused,
the run left open at the end is not reported again as ``truncated``.)

Each :class:`Finding` has a :class:`Severity`:

* ``error`` — AG-UI 1.0 requires a client to reject this (the consumer profile);
* ``warning`` — only the producer profile refuses it: a 1.0 client accepts the
  stream, but a well-behaved producer does not send it (reported with
  ``profile="producer"``);
* ``hygiene`` — the decoder dropped or rewrote something the stream should not
  carry (an unknown event type, a stripped property, a legacy null); never a
  rejection.

A stream is rejected exactly when some finding is an error or a warning — the
verdict of the first-violation path under the same profile, whose exit codes
``--all`` keeps.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import ag_ui.core as ag
from ag_ui.core import BaseEvent, EventType

from .._foundation.errors import ProtocolViolation
from .._foundation.limits import Limits
from .._protocol.chunks import ChunkExpander
from .._protocol.decode import (
    DecodeError,
    DecodeWarning,
    as_object,
    decode_event,
    decode_legacy_event,
)
from .._protocol.legacy import has_binary_part
from .._protocol.transport_rules import TRANSPORT_RULES
from ..verify import Profile, Rule, VerificationError, Verifier
from .consume import Folder, WireItem, is_legacy_type, legacy_boundary

if TYPE_CHECKING:
    from ..transformers.compat import Compat

__all__ = [
    "DECODE_SECTION",
    "MALFORMED",
    "PRODUCER_ONLY",
    "RULE_SECTIONS",
    "WARNING_CODES",
    "Finding",
    "FindingCollector",
    "Severity",
    "rejected",
    "rule_catalogue",
    "rule_catalogue_markdown",
    "transport_catalogue_markdown",
]


class Severity(str, enum.Enum):
    """How bad a finding is (see the module doc)."""

    ERROR = "error"
    WARNING = "warning"
    HYGIENE = "hygiene"

    def __str__(self) -> str:
        return self.value


MALFORMED: Final = "malformed-event"
"""The rule name of a described field holding a malformed value (a DecodeError)."""

DECODE_SECTION: Final = "6. Processing model"

RULE_SECTIONS: Final[dict[str, str]] = {
    Rule.FIRST_EVENT.value: "4. Sequencing",
    Rule.RUN_ENDED.value: "4. Sequencing",
    Rule.DUPLICATE_RUN_STARTED.value: "4. Sequencing",
    Rule.DUPLICATE_START.value: "4. Sequencing",
    Rule.NOT_OPEN.value: "4. Sequencing",
    Rule.UNKNOWN_ID.value: "4. Sequencing",
    Rule.OUT_OF_ORDER.value: "4. Sequencing",
    Rule.OPEN_AT_FINISH.value: "4. Sequencing",
    Rule.TRUNCATED.value: "4. Sequencing",
    Rule.OWNER_MISMATCH.value: "3. Subagent attribution",
    Rule.CHUNK_INCOMPLETE.value: "5. Chunks",
    Rule.CHUNK_CONFLICT.value: "5. Chunks",
    Rule.CHUNK_AMBIGUOUS.value: "5. Chunks",
    Rule.UNEXPANDED_CHUNK.value: "5. Chunks",
    Rule.LIMIT_EXCEEDED.value: "7. State and snapshots",
    Rule.INTERRUPT_SHAPE.value: "2. Event catalogue",
    Rule.SUSPENDED_INTERRUPTS.value: "2. Event catalogue",
    MALFORMED: DECODE_SECTION,
}
"""The section of the AG-UI 1.0 rules (docs: the spec's numbered headings) behind each rule."""

_MALFORMED_MEANING: Final = "a described field holds a malformed value, or the input is not JSON"

# The decoder's warning codes, with what each says (the catalogue lists them too).
WARNING_CODES: Final[dict[str, str]] = {
    "unknown-event-type": "an event of a type AG-UI 1.0 does not describe was dropped",
    "unknown-property": "a property the event's type does not describe was stripped",
    "unknown-member": "an unknown member of a closed union (outcome, part, patch op) was stripped",
    "legacy-null": "a null where 1.0 requires absence was read as absent",
    "protocol-version": "the stream names a protocol version this consumer does not speak",
    "legacy-content": "a pre-1.0 content part was upgraded",
    "compat": "the compatibility boundary translated a pre-1.0 event",
}

PRODUCER_ONLY: Final = frozenset(
    {Rule.OUT_OF_ORDER, Rule.LIMIT_EXCEEDED, Rule.INTERRUPT_SHAPE, Rule.SUSPENDED_INTERRUPTS}
)
"""Rules only the producer profile applies. Any other rule found only by the producer
profile (a second run on one stream, a tool result for an unknown call) is a warning too."""

_TERMINAL: Final = (ag.RunFinishedEvent, ag.RunErrorEvent)


@dataclass(frozen=True)
class Finding:
    """One thing wrong (or suspicious) in a stream.

    ``index`` is the wire event's position (0-based), None for the end of the
    stream; ``event_type`` the event's type when it was read.
    """

    rule: str
    severity: Severity
    message: str
    index: int | None
    event_type: str | None = None

    @property
    def section(self) -> str:
        """The AG-UI 1.0 rules section this finding comes from.

        For a transport rule (``verify URL``), which the AG-UI 1.0 rules do not
        cover: the specification section behind it, or the reason.
        """
        transport = TRANSPORT_RULES.get(self.rule)
        if transport is not None:
            return transport.basis
        return RULE_SECTIONS.get(self.rule, DECODE_SECTION)

    @property
    def transport(self) -> bool:
        """Whether this is a finding on the HTTP exchange, not on an event."""
        return self.rule in TRANSPORT_RULES

    @property
    def reference(self) -> str:
        """Where the rule comes from, as the reports cite it."""
        if self.transport:
            return self.section
        return f"AG-UI 1.0 rules, {self.section}"

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "index": self.index,
            "eventType": self.event_type,
            "message": self.message,
            "section": self.section,
        }


class FindingCollector:
    """Push wire events, then :meth:`finish`: every finding, in stream order.

    ``profile`` as for :class:`~agui_pipes.Verifier`; ``compat`` as for
    :class:`~agui_pipes.Consumer` (a ``Compat(direction="up")`` stage between
    decoding and chunk expansion).
    """

    def __init__(
        self,
        *,
        profile: Profile = "consumer",
        allow_truncated: bool = False,
        limits: Limits | None = None,
        compat: Compat | bool | None = None,
    ) -> None:
        self.findings: list[Finding] = []
        # As for Consumer: None engages the reference client's boundary at the first
        # legacy shape, False is the strict 1.0 view, True or a stage engages it now.
        self._auto_compat = compat is None
        if compat is None or compat is False:
            compat = None
        elif compat is True:
            compat = legacy_boundary()
        self._warnings: list[DecodeWarning] = []
        self._taken = 0
        self._consumer = Verifier("consumer")
        self._producer = Verifier("producer") if profile == "producer" else None
        self._folder = Folder({}, None, limits, strict=profile == "producer")
        self._expander = ChunkExpander()
        self._compat = compat
        self._compat_taken = 0
        self._allow_truncated = allow_truncated
        self._index = 0
        self._dropped_terminal = False
        self._saw_event = False

    @property
    def saw_event(self) -> bool:
        """Whether any pushed item was an AG-UI 1.0 event (not all dropped or malformed)."""
        return self._saw_event

    @property
    def findings_at_error(self) -> bool:
        """Whether any finding so far is an error."""
        return any(f.severity is Severity.ERROR for f in self.findings)

    @property
    def events(self) -> int:
        """How many wire items were pushed."""
        return self._index

    def push(self, item: WireItem) -> None:
        index = self._index
        self._index = index + 1
        event = self._decode(item, index)
        self._take_warnings(index)
        if event is None:
            return
        self._saw_event = True
        for translated in self._translated(event, index):
            self._check(translated, index)

    def _decode(self, item: WireItem, index: int) -> BaseEvent | None:
        if isinstance(item, BaseEvent):
            return item
        try:
            raw = as_object(item, index)
            if self._compat is not None:
                return decode_legacy_event(raw, index, self._warnings)
            before = len(self._warnings)
            event = decode_event(raw, index, self._warnings)
            if self._auto_compat and (
                (event is None and is_legacy_type(raw))
                or (isinstance(event, ag.MessagesSnapshotEvent) and has_binary_part(raw))
            ):
                del self._warnings[before:]  # the boundary reads it again, and says so
                self._auto_compat = False
                self._compat = legacy_boundary()
                return decode_legacy_event(raw, index, self._warnings)
            return event
        except DecodeError as error:
            self.findings.append(
                Finding(MALFORMED, Severity.ERROR, str(error), index, error.event_type)
            )
            return None

    def _translated(self, event: BaseEvent, index: int) -> Sequence[BaseEvent]:
        compat = self._compat
        if compat is None:
            return (event,)
        try:
            out = list(compat.transform(event))
        except ProtocolViolation as violation:
            self._record(violation, index, event, Severity.ERROR)
            return ()
        self._take_compat_warnings(index)
        return out

    def _check(self, event: BaseEvent, index: int) -> None:
        if event.type.__class__ is not EventType:
            return  # a pre-1.0 event: an unknown type in 1.0, its warning already taken
        try:
            expanded = self._expander.expand(event)
        except ProtocolViolation as violation:
            self._record(violation, index, event, Severity.ERROR)
            return
        for out in expanded:
            self._verify(out, index)

    def _verify(self, event: BaseEvent, index: int) -> None:
        try:
            self._consumer.observe(event)
        except VerificationError as violation:
            self._record(violation, index, event, Severity.ERROR)
            self._note_drop(event)
            return
        producer = self._producer
        if producer is not None:
            try:
                producer.observe(event)
            except VerificationError as violation:
                self._record(violation, index, event, Severity.WARNING)
                self._note_drop(event)
                return
        try:
            self._folder.apply(event)
        except ProtocolViolation as violation:
            severity = Severity.WARNING if self._producer is not None else Severity.ERROR
            self._record(violation, index, event, severity)
        self._take_warnings(index)
        if isinstance(event, ag.RunStartedEvent):
            self._dropped_terminal = False

    def _note_drop(self, event: BaseEvent) -> None:
        if isinstance(event, _TERMINAL):
            self._dropped_terminal = True

    def _record(
        self,
        violation: ProtocolViolation,
        index: int | None,
        event: BaseEvent | None,
        severity: Severity,
    ) -> None:
        rule = violation.rule.value if isinstance(violation, VerificationError) else MALFORMED
        message = violation.detail if isinstance(violation, VerificationError) else str(violation)
        self.findings.append(
            Finding(rule, severity, message, index, None if event is None else event.type.value)
        )

    def _take_warnings(self, index: int | None) -> None:
        for warning in self._warnings[self._taken :]:
            where = warning.index if warning.index is not None else index
            self.findings.append(Finding(warning.code, Severity.HYGIENE, warning.message, where))
        self._taken = len(self._warnings)
        folder_warnings = self._folder.warnings
        if folder_warnings:
            for warning in folder_warnings:
                where = warning.index if warning.index is not None else index
                self.findings.append(
                    Finding(warning.code, Severity.HYGIENE, warning.message, where)
                )
            folder_warnings.clear()

    def _take_compat_warnings(self, index: int) -> None:
        compat = self._compat
        assert compat is not None
        fresh = compat.warnings[self._compat_taken :]
        self._compat_taken = len(compat.warnings)
        for warning in fresh:
            where = warning.index if warning.index is not None else index
            self.findings.append(Finding(warning.code, Severity.HYGIENE, warning.message, where))

    def finish(self) -> list[Finding]:
        """End of stream: the truncation check, then every finding."""
        end = self._index - 1 if self._index else None
        if self._compat is not None:
            try:
                tail = list(self._compat.finish())
            except ProtocolViolation as violation:
                self._record(violation, end, None, Severity.ERROR)
                tail = []
            self._take_compat_warnings(end or 0)
            for event in tail:
                self._check(event, end or 0)
        if not self._saw_event:
            self.findings.append(
                Finding(
                    Rule.FIRST_EVENT.value,
                    Severity.ERROR,
                    "the stream ended before its first event: no AG-UI event in it",
                    None,
                )
            )
            return self.findings
        if not self._dropped_terminal:
            for verifier, severity in (
                (self._consumer, Severity.ERROR),
                (self._producer, Severity.WARNING),
            ):
                if verifier is None:
                    continue
                try:
                    verifier.finish(allow_truncated=self._allow_truncated)
                except VerificationError as violation:
                    self._record(violation, None, None, severity)
                    break
        return self.findings


def rejected(findings: Iterable[Finding]) -> bool:
    """Would the first-violation path reject this stream (any error or warning finding)?"""
    return any(f.severity is not Severity.HYGIENE for f in findings)


CATALOGUE_BEGIN: Final = "<!-- rule catalogue: generated from agui_pipes/_consumer/findings.py -->"
CATALOGUE_END: Final = "<!-- end of rule catalogue -->"


def rule_catalogue_markdown() -> str:
    """The catalogue as the Markdown table docs/rules.md carries (a test keeps them equal)."""
    lines = [
        CATALOGUE_BEGIN,
        "",
        "| rule | severity | AG-UI 1.0 rules section | meaning |",
        "|---|---|---|---|",
    ]
    for rule, severity, section, meaning in rule_catalogue(transport=False):
        lines.append(f"| `{rule}` | {severity} | {section} | {meaning.replace('|', '/')} |")
    lines += ["", CATALOGUE_END]
    return "\n".join(lines)


TRANSPORT_BEGIN: Final = (
    "<!-- transport rule catalogue: generated from agui_pipes/_protocol/transport_rules.py -->"
)
TRANSPORT_END: Final = "<!-- end of transport rule catalogue -->"


def transport_catalogue_markdown() -> str:
    """The transport rules as the table docs/rules.md carries (a test keeps them equal)."""
    lines = [
        TRANSPORT_BEGIN,
        "",
        "| rule | severity | required by (specification section, or the reason) | meaning |",
        "|---|---|---|---|",
    ]
    for rule in TRANSPORT_RULES.values():
        lines.append(
            f"| `{rule.name}` | {rule.severity} | {rule.basis.replace('|', '/')} | "
            f"{rule.meaning.replace('|', '/')} |"
        )
    lines += ["", TRANSPORT_END]
    return "\n".join(lines)


def rule_catalogue(*, transport: bool = True) -> list[tuple[str, str, str, str]]:
    """(rule, severity, section, meaning) for every rule and warning code, for the docs.

    With ``transport`` (the default) the transport rules of ``verify URL`` follow,
    each with its basis as the section.
    """
    rows: list[tuple[str, str, str, str]] = []
    for rule in Rule:
        severity = "warning" if rule in PRODUCER_ONLY else "error"
        rows.append((rule.value, severity, RULE_SECTIONS[rule.value], rule.describe()))
    rows.append((MALFORMED, "error", DECODE_SECTION, _MALFORMED_MEANING))
    for code, meaning in WARNING_CODES.items():
        rows.append((code, "hygiene", DECODE_SECTION, meaning))
    if transport:
        for entry in TRANSPORT_RULES.values():
            rows.append((entry.name, entry.severity, entry.basis, entry.meaning))
    return rows
