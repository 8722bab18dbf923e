"""Helpers of the ecosystem tests: library versions and fresh-process programs."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import textwrap


def library_version(name: str) -> str:
    """The installed version without its local label (torch 2.13.0+cpu and 2.13.0 are one row)."""
    try:
        return importlib.metadata.version(name).split("+", 1)[0]
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def run_program(code: str, *args: str, timeout: float = 600, **env: str):
    """python -c code in a fresh process; ``env`` entries set to "" are removed."""
    child = {k: v for k, v in os.environ.items() if k not in env or env[k] != ""}
    child.update({k: v for k, v in env.items() if v != ""})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env=child,
        timeout=timeout,
        check=False,
    )
