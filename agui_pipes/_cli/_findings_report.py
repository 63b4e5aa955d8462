"""``agui-pipes verify --all``'s reports: the findings as text, JSON, SARIF 2.1.0 or JUnit XML.

One function per format, each taking the findings with their input lines; the
registry ``REPORTERS`` maps ``--format`` names to them. ``verify URL`` writes
the same reports, its input the URL, with the transport findings among them
(placed at ``transport`` rather than at an event, cited by their basis).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final
from xml.etree import ElementTree

from .._consumer.findings import Finding, Severity, rejected, rule_catalogue
from .._foundation import json as _json
from .._version import __version__

__all__ = ["REPORTERS", "Located", "Report"]

TOOL_NAME: Final = "agui-pipes verify"
RULES_URI: Final = "https://docs.ag-ui.com/"


@dataclass(frozen=True)
class Located:
    """A finding with the input's line of its event (None: standard input, or end of stream)."""

    finding: Finding
    line: int | None


@dataclass(frozen=True)
class Report:
    """What every format is made from."""

    path: str
    """The input's name (``<stdin>`` for standard input)."""
    profile: str
    events: int
    findings: Sequence[Located]
    transport: bool = False
    """A live endpoint's report (``verify URL``): SARIF lists the transport rules too."""

    @property
    def rejected(self) -> bool:
        return rejected(item.finding for item in self.findings)

    def counts(self) -> dict[str, int]:
        counts = {severity.value: 0 for severity in Severity}
        for item in self.findings:
            counts[item.finding.severity.value] += 1
        return counts


def _where(report: Report, item: Located) -> str:
    finding = item.finding
    if finding.index is None and finding.transport:
        place = "transport"
    elif finding.index is None:
        place = "end of stream"
    else:
        kind = f" ({finding.event_type})" if finding.event_type else ""
        place = f"event #{finding.index}{kind}"
    if item.line is not None:
        return f"{report.path}:{item.line}: {place}"
    return f"{report.path}: {place}"


def text(report: Report) -> str:
    lines = [
        f"{_where(report, item)}: {item.finding.severity} {item.finding.rule}: "
        f"{item.finding.message} [{item.finding.reference}]"
        for item in report.findings
    ]
    counts = report.counts()
    verdict = "rejected" if report.rejected else "accepted"
    lines.append(
        f"{verdict}: {report.events} event{'s' if report.events != 1 else ''}, "
        f"{counts['error']} error{'s' if counts['error'] != 1 else ''}, "
        f"{counts['warning']} warning{'s' if counts['warning'] != 1 else ''}, "
        f"{counts['hygiene']} hygiene ({report.profile} profile)"
    )
    return "\n".join(lines) + "\n"


def json_report(report: Report) -> str:
    document = {
        "tool": TOOL_NAME,
        "version": __version__,
        "input": report.path,
        "profile": report.profile,
        "verdict": "rejected" if report.rejected else "accepted",
        "events": report.events,
        "counts": report.counts(),
        "findings": [{**item.finding.to_json(), "line": item.line} for item in report.findings],
    }
    return _json.dumps_text(document, ensure_ascii=False) + "\n"


_SARIF_LEVEL: Final = {
    Severity.ERROR: "error",
    Severity.WARNING: "warning",
    Severity.HYGIENE: "note",
}


def sarif(report: Report) -> str:
    catalogue = rule_catalogue(transport=report.transport)
    index = {rule: position for position, (rule, *_) in enumerate(catalogue)}
    rules = [
        {
            "id": rule,
            "name": rule,
            "shortDescription": {"text": meaning},
            "defaultConfiguration": {"level": _SARIF_LEVEL[Severity(severity)]},
            "properties": {"section": section, "severity": severity},
        }
        for rule, severity, section, meaning in catalogue
    ]
    results: list[dict[str, Any]] = []
    for item in report.findings:
        finding = item.finding
        result: dict[str, Any] = {
            "ruleId": finding.rule,
            "level": _SARIF_LEVEL[finding.severity],
            "message": {"text": finding.message},
            "properties": {
                "severity": finding.severity.value,
                "eventIndex": finding.index,
                "eventType": finding.event_type,
                "section": finding.section,
            },
        }
        if finding.rule in index:
            result["ruleIndex"] = index[finding.rule]
        location: dict[str, Any] = {"artifactLocation": {"uri": report.path}}
        if item.line is not None:
            location["region"] = {"startLine": item.line}
        result["locations"] = [{"physicalLocation": location}]
        results.append(result)
    document = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": TOOL_NAME,
                        "version": __version__,
                        "informationUri": RULES_URI,
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return _json.dumps_text(document, ensure_ascii=False) + "\n"


def junit(report: Report) -> str:
    """One test case per finding (errors and warnings fail; hygiene passes with its text).

    A stream with no findings is one passing test case, so a CI dashboard shows
    the input was checked.
    """
    counts = report.counts()
    suites = ElementTree.Element("testsuites", name=TOOL_NAME)
    failures = counts["error"] + counts["warning"]
    cases = max(len(report.findings), 1)
    suite = ElementTree.SubElement(
        suites,
        "testsuite",
        name=report.path,
        tests=str(cases),
        failures=str(failures),
        errors="0",
        skipped="0",
    )
    props = ElementTree.SubElement(suite, "properties")
    ElementTree.SubElement(props, "property", name="profile", value=report.profile)
    ElementTree.SubElement(props, "property", name="events", value=str(report.events))
    if not report.findings:
        ElementTree.SubElement(suite, "testcase", classname=TOOL_NAME, name=report.path)
    for item in report.findings:
        finding = item.finding
        case = ElementTree.SubElement(
            suite,
            "testcase",
            classname=f"{TOOL_NAME}.{finding.rule}",
            name=_where(report, item),
        )
        body = f"{finding.message}\n[{finding.reference}]"
        if finding.severity is Severity.HYGIENE:
            out = ElementTree.SubElement(case, "system-out")
            out.text = f"hygiene {finding.rule}: {body}"
        else:
            failure = ElementTree.SubElement(
                case,
                "failure",
                type=finding.rule,
                message=f"{finding.severity} {finding.rule}: {finding.message}"[:500],
            )
            failure.text = body
    ElementTree.indent(suites)
    return ElementTree.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


REPORTERS: Final[dict[str, Callable[[Report], str]]] = {
    "text": text,
    "json": json_report,
    "sarif": sarif,
    "junit": junit,
}
