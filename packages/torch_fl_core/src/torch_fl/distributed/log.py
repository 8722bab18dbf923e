"""``FLAGOS_LOG=dist``: one line per distributed decision (tier choice, skipped tiers) on stderr.

Read per call rather than once at import so a test (or a user in a notebook) can switch it on
after ``import torch``.
"""

from __future__ import annotations

import os
import re
import sys

__all__ = ["enabled", "log"]

_PREFIX = "[flagos dist]"


def enabled(environ: dict[str, str] | None = None) -> bool:
    """Whether ``FLAGOS_LOG`` names ``dist`` (or ``all``)."""
    value = (os.environ if environ is None else environ).get("FLAGOS_LOG", "")
    tokens = {t for t in re.split(r"[,\s]+", value.strip().lower()) if t}
    return bool(tokens & {"dist", "all"})


def log(message: str) -> None:
    """Print ``[flagos dist] <message>`` to stderr when ``FLAGOS_LOG=dist``."""
    if enabled():
        print(f"{_PREFIX} {message}", file=sys.stderr, flush=True)
