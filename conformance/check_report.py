"""How a protocol check is told: each requirement with its level, spec section, verdict and exchange,
as text for a person or as JSON for CI (the same content)."""

from __future__ import annotations

import json
from typing import Any, Final

from conformance.check import LEGACY, MODERN, Report, Verdict
from conformance.probe import Line
from conformance.report import shorten
from conformance.transcript import Expect, Send, render_step
from conformance.wire import JsonLine, wire_text

STATUSES: Final = ("pass", "fail", "not supported", "not checked")
_LABEL: Final = {"pass": "PASS", "fail": "FAIL", "not supported": "NOT SUPPORTED", "not checked": "NOT CHECKED"}
_COUNTED: Final = {"pass": "passed", "fail": "failed", "not supported": "not supported", "not checked": "not checked"}
_SHOWN: Final = 200


def summary(report: Report) -> str:
    return ", ".join(f"{report.count(status)} {_COUNTED[status]}" for status in STATUSES)


def format_text(report: Report, verbose: bool = False) -> str:
    """Every requirement with its verdict; the exchange of each that failed (of every one when verbose)."""
    lines = [f"mcp-conformance check -- {' '.join(report.command)}", _eras_line(report), ""]
    for verdict in report.verdicts:
        lines.extend(_verdict_lines(verdict, verbose or verdict.status == "fail"))
    lines.append(summary(report))
    return "\n".join(lines)


def _eras_line(report: Report) -> str:
    claims = report.claims
    eras = [f"{era} ({claims.version(era)}; capabilities: {', '.join(sorted(claims.capabilities(era))) or 'none'})"
            for era in claims.eras()]
    schemas = str(report.spec) if report.spec is not None else "none (pass --spec)"
    return f"eras claimed: {'; '.join(eras) or 'none'}. schemas: {schemas}"


def _verdict_lines(verdict: Verdict, with_exchange: bool) -> list[str]:
    requirement = verdict.requirement
    head = f"{_LABEL[verdict.status]:<14}{requirement.id}  [{requirement.level}, {requirement.section}]"
    lines = [head, f"{'':14}{requirement.text}"]
    if verdict.reason:
        lines.append(f"{'':14}{'why' if verdict.status == 'fail' else 'note'}: {verdict.reason}")
    if with_exchange:
        lines.extend(f"{'':14}{_arrow(line)} {shorten(_line_text(line), _SHOWN)}" for line in verdict.exchange)
    return lines


def _arrow(line: Line) -> str:
    return {"c2s": ">", "s2c": "<"}.get(line.direction, "#")


def _line_text(line: Line) -> str:
    if line.direction == "note" and isinstance(line.wire, JsonLine):
        return str(line.wire.value)
    return wire_text(line.wire)


def as_json(report: Report) -> dict[str, Any]:
    claims = report.claims
    return {
        "command": list(report.command),
        "spec": str(report.spec) if report.spec is not None else None,
        "eras": {
            era: {
                "claimed": claims.claimed(era),
                "version": claims.version(era) if claims.claimed(era) else None,
                "capabilities": sorted(claims.capabilities(era)) if claims.claimed(era) else [],
            }
            for era in (LEGACY, MODERN)
        },
        "requirements": [_verdict_json(verdict) for verdict in report.verdicts],
        "summary": {status: report.count(status) for status in STATUSES},
    }


def _verdict_json(verdict: Verdict) -> dict[str, Any]:
    requirement = verdict.requirement
    return {
        "id": requirement.id,
        "era": verdict.era,
        "level": requirement.level,
        "section": str(requirement.section),
        "url": requirement.section.url,
        "requirement": requirement.text,
        "status": verdict.status,
        "reason": verdict.reason,
        "exchange": [_exchange_json(line) for line in verdict.exchange],
    }


def _exchange_json(line: Line) -> dict[str, Any]:
    if line.direction == "note":
        return {"note": _line_text(line)}
    step = Send(line.wire) if line.direction == "c2s" else Expect(line.wire)
    rendered: dict[str, Any] = json.loads(render_step(step))
    return rendered
