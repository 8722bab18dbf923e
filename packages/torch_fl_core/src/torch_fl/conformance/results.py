"""What a conformance run records: one :class:`OpResult` per (OpInfo entry, dtype).

Each result holds up to three :class:`CheckResult` (``forward``, ``inplace``, ``backward``), each
classified as

- ``pass``: every sample that ran on CPU gave the same result on ``flagos``;
- ``wrong``: a sample's ``flagos`` result differs (values, shape, dtype, device, aliasing or
  mutated inputs); the detail names the sample index and the max abs/rel difference;
- ``error``: ``flagos`` raised where CPU did not; the detail names the exception type and the first
  line of its message;
- ``skipped``: nothing could be compared, with the reason (no samples for the dtype, OpInfo says the
  dtype is not supported on CPU, CPU itself raises, no in-place variant, no autograd).

The entry's outcome is the worst of its checks (error > wrong > pass); ``skipped`` only when every
check is skipped.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["OUTCOMES", "CheckResult", "OpResult"]

OUTCOMES = ("pass", "wrong", "error", "skipped")
_RANK = {"skipped": 0, "pass": 1, "wrong": 2, "error": 3}


@dataclass
class CheckResult:
    check: str  # forward | inplace | backward
    outcome: str
    detail: str = ""
    samples: int = 0  # samples compared (CPU ran them)
    failed: int = 0  # samples that were wrong or raised on flagos
    cpu_errors: int = 0  # samples CPU itself raised on (not compared)

    def summary(self) -> str:
        if self.outcome == "pass":
            return f"{self.check}: pass ({self.samples} samples){_note(self.detail)}"
        if self.outcome == "skipped":
            return f"{self.check}: skipped: {self.detail}"
        return f"{self.check}: {self.outcome}: {self.detail}"


def _core(detail: str) -> str:
    """A failure's message without its sample index and sample counts."""
    text = detail.split(": ", 1)[1] if detail.startswith("sample ") else detail
    return text.rsplit(" [", 1)[0]


def _note(detail: str) -> str:
    return f"; {detail}" if detail else ""


@dataclass
class OpResult:
    name: str
    variant: str
    dtype: str
    has_samples: bool
    checks: list[CheckResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.variant}" if self.variant else self.name

    @property
    def outcome(self) -> str:
        ran = [c.outcome for c in self.checks if c.outcome != "skipped"]
        return max(ran, key=_RANK.__getitem__) if ran else "skipped"

    def check(self, name: str) -> CheckResult | None:
        return next((c for c in self.checks if c.check == name), None)

    @property
    def detail(self) -> str:
        """The failing checks' details (all of them); for a pass, notes; for a skip, the reason."""
        outcome = self.outcome
        if outcome == "skipped":
            return "; ".join(dict.fromkeys(c.detail for c in self.checks if c.detail))
        if outcome == "pass":
            notes = [c.detail for c in self.checks if c.outcome == "pass" and c.detail]
            return "; ".join(dict.fromkeys(notes))
        parts: list[str] = []
        first_check: dict[str, str] = {}  # failure message -> the check that showed it first
        for c in self.checks:
            if c.outcome not in ("wrong", "error"):
                continue
            core = _core(c.detail)
            if core in first_check:  # e.g. backward failing the way forward did: say so briefly
                parts.append(f"{c.check}: {c.outcome} (same as {first_check[core]})")
                continue
            first_check[core] = c.check
            parts.append(c.summary())
        return " | ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["outcome"] = self.outcome
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OpResult:
        checks = [CheckResult(**c) for c in d.get("checks", [])]
        return cls(
            name=d["name"],
            variant=d["variant"],
            dtype=d["dtype"],
            has_samples=d["has_samples"],
            checks=checks,
            seconds=d.get("seconds", 0.0),
        )
