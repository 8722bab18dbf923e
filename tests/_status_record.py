"""Records what a run of the contract suites gave, for docs/contracts.md's status table.

With ``FLAGOS_TEST_CONTRACTS_DIR`` set (``nox -s tests`` and ``nox -s test-<vendor>`` set it to
``docs/data/contracts``), a run that collected ``tests/contract`` writes
``<dir>/<vendor>-<machine>.json``: per suite its passed/skipped/xfailed/failed counts and skip
reasons, the totals, and the run's torch, date, command and source commit. That file is the
current row of its vendor and machine; ``tools/contracts_table.py`` writes the table from these
files. The counts are pytest's own outcome categories (``pytest_report_teststatus``), gathered in
the process that prints the summary line (the controller, under pytest-xdist).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRACT_DIR = "tests/contract/"
#: The outcome categories counted, in the order a table cell lists them.
CATEGORIES = ("passed", "skipped", "xfailed", "xpassed", "failed", "error")
ENV = "FLAGOS_TEST_CONTRACTS_DIR"


def machine_name() -> str:
    """``FLAGOS_TEST_MACHINE``, else a name for this host: its NVIDIA GPUs' model and count
    (``h200-x2``) where the driver lists any, else its CPU count (``cpu-2``). Read from the
    driver's files, so the run's own CUDA state is left alone."""
    explicit = os.environ.get("FLAGOS_TEST_MACHINE")
    if explicit:
        return explicit
    gpus = sorted(Path("/proc/driver/nvidia/gpus").glob("*/information"))
    if gpus:
        model = re.search(r"^Model:\s*(.+)$", gpus[0].read_text(), re.M)
        name = model.group(1) if model else "nvidia"
        name = re.sub(r"^NVIDIA\s+", "", name).split()[0].lower()
        return f"{name}-x{len(gpus)}"
    return f"cpu-{os.cpu_count() or 1}"


def group_of(nodeid: str) -> str:
    """A contract suite by its file name; any other test by its directory."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(CONTRACT_DIR):
        return path[len(CONTRACT_DIR) :]
    return path.rsplit("/", 1)[0] if "/" in path else path


def skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason.removeprefix("Skipped: ")


def _source() -> str:
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=ROOT, capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _vendor() -> tuple[str, str | None]:
    try:
        import torch_fl

        v = torch_fl.vendor()
        # The emulator's phrase without this machine's paths.
        emulated = re.sub(r" at /\S+", "", v.emulated) if v.emulated else None
        return str(v.name), emulated
    except Exception:  # the record names the vendor asked for, whatever failed to load
        return os.environ.get("FLAGOS_VENDOR", "sim"), None


class StatusRecord:
    """The pytest plugin: counts every test report, writes the record at the session's end."""

    def __init__(self, config: pytest.Config, out: Path) -> None:
        self.config = config
        self.out = out
        self.started = time.monotonic()
        self.counts: dict[str, Counter] = defaultdict(Counter)
        self.reasons: dict[str, Counter] = defaultdict(Counter)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        category, _, _ = self.config.hook.pytest_report_teststatus(
            report=report, config=self.config
        )
        if category not in CATEGORIES:
            return  # the setup and teardown of a test that ran
        group = group_of(report.nodeid)
        self.counts[group][category] += 1
        if category == "skipped":
            self.reasons[group][skip_reason(report)] += 1

    def record(self) -> dict:
        import torch

        vendor, emulated = _vendor()
        suites = {}
        for group in sorted(self.counts):
            entry: dict = {c: self.counts[group][c] for c in CATEGORIES if self.counts[group][c]}
            if self.reasons[group]:
                entry["skip_reasons"] = dict(sorted(self.reasons[group].items()))
            suites[group] = entry
        totals = sum(self.counts.values(), Counter())
        # Paths as the checkout spells them, not as this machine does.
        args = [
            os.path.relpath(a, ROOT) if os.path.isabs(a) and a.startswith(str(ROOT)) else str(a)
            for a in self.config.invocation_params.args
        ]
        return {
            "vendor": vendor,
            "emulated": emulated,
            "machine": machine_name(),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "source": _source(),
            "command": " ".join(["python -m pytest", *args]),
            "workers": os.environ.get("PYTEST_XDIST_WORKER_COUNT")
            or getattr(self.config.option, "numprocesses", None)
            or 1,
            "duration_s": round(time.monotonic() - self.started),
            "recorded_by": "tests/_status_record.py",
            "suites": suites,
            "totals": {c: totals[c] for c in CATEGORIES if totals[c]},
        }

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # Only a run of the contract suites is a status row (not a package's own tests).
        if not any(g.endswith(".py") for g in self.counts):
            return
        doc = self.record()
        self.out.mkdir(parents=True, exist_ok=True)
        path = self.out / f"{doc['vendor']}-{doc['machine']}.json"
        path.write_text(json.dumps(doc, indent=1) + "\n")
        if self.out.resolve() == (ROOT / "docs" / "data" / "contracts").resolve():
            # The data and the table it makes change together, whatever the run's outcome: a
            # failed run that rewrote one but not the other would fail the next run's check.
            subprocess.run(
                [sys.executable, str(ROOT / "tools" / "contracts_table.py")],
                check=False,
                capture_output=True,
            )


def register(config: pytest.Config) -> None:
    """Adds the recorder where ``FLAGOS_TEST_CONTRACTS_DIR`` asks for it, once, in the process
    that sees every report (not in a pytest-xdist worker)."""
    out = os.environ.get(ENV)
    if not out or hasattr(config, "workerinput"):
        return
    if not config.pluginmanager.has_plugin("torch-fl-status-record"):
        config.pluginmanager.register(StatusRecord(config, Path(out)), "torch-fl-status-record")
