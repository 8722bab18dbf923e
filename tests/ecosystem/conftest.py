"""Libraries users train with, run on flagos against the same program on CPU.

Each test is the smallest program that library's users write, run in a fresh process (the
libraries cache device decisions per process). With ``FLAGOS_TEST_ECOSYSTEM_DIR`` set, each result is
recorded (library, version, the case's statement, whether it holds, vendor) in ``<dir>/<vendor>.json``, from which
``tools/ecosystem_table.py`` writes the table of docs/ecosystem.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _ecosystem import library_version

_RESULTS: list[dict] = []


def pytest_runtest_makereport(item, call):
    if call.when != "call" and not (call.when == "setup" and call.excinfo is not None):
        return
    marker = item.get_closest_marker("library")
    if marker is None:
        return
    name = marker.args[0]
    if call.excinfo is None:
        outcome = "yes"
    elif call.excinfo.errisinstance(pytest.skip.Exception):
        outcome = "skipped"
    else:
        outcome = "no"
    _RESULTS.append(
        {
            "library": name,
            "version": library_version(marker.kwargs.get("dist", name)),
            "case": item.function.__doc__.strip().splitlines()[0]
            if item.function.__doc__
            else item.name,
            "test": item.nodeid.split("::", 1)[-1],
            "outcome": outcome,
        }
    )


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("FLAGOS_TEST_ECOSYSTEM_DIR")
    if not out or not _RESULTS:
        return
    vendor = os.environ.get("FLAGOS_VENDOR", "sim")
    # One file per pytest-xdist worker; tools/ecosystem_table.py merges them.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    path = Path(out) / f"{vendor}.{worker}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"vendor": vendor, "results": _RESULTS}, indent=1))
