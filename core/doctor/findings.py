"""A finding: how bad, which check, what was seen and what to do about it."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.IntEnum):
    """Ordered so that ``max()`` of a report is its worst finding."""

    OK = 0
    WARN = 1
    FAIL = 2


@dataclass(frozen=True, slots=True)
class Finding:
    severity: Severity
    check: str
    """The family: crds, rbac, webhook, certificates, operators, enrolment."""
    message: str
    """What was seen, naming the object (and field)."""
    fix: str = ""
    """One line saying what to run or change; empty for ``OK``."""

    def line(self) -> str:
        text = f"{self.severity.name:<5} {self.check}: {self.message}"
        return f"{text} — {self.fix}" if self.fix else text

    def document(self) -> dict[str, str]:
        return {
            "severity": self.severity.name,
            "check": self.check,
            "message": self.message,
            "fix": self.fix,
        }


def ok(check: str, message: str) -> Finding:
    return Finding(Severity.OK, check, message)


def warn(check: str, message: str, fix: str) -> Finding:
    return Finding(Severity.WARN, check, message, fix)


def fail(check: str, message: str, fix: str) -> Finding:
    return Finding(Severity.FAIL, check, message, fix)


def exit_code(findings: list[Finding], strict: bool = False) -> int:
    """1 when something FAILed (or, with ``strict``, WARNed); 0 otherwise."""
    worst = max((f.severity for f in findings), default=Severity.OK)
    threshold = Severity.WARN if strict else Severity.FAIL
    return 1 if worst >= threshold else 0
