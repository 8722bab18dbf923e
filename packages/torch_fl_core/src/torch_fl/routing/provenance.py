"""FlagGems provenance of route tables: ``flaggems`` choices only where they were measured.

A table whose ``flaggems`` routes were measured on one FlagGems (a gap set was taken on one
revision, device and torch minor) says so in a pragma::

    # flaggems-measured: flag_gems git:3c6f7537d on Enflame S60, torch 2.10

When the table loads and the installed FlagGems is not the measured one, the ``flaggems`` choice
of that file's preference lists is demoted: the list resolves to its next choice, and the rule
records why (``python -m torch_fl.routing explain`` shows it). One warning per table and installed
version says so, naming both versions. ``FLAGOS_FLAGGEMS_UNMEASURED=1`` keeps the ``flaggems``
choices on an unmeasured FlagGems. Without FlagGems installed nothing is demoted: the choice is
unavailable anyway and the list resolves to its next choice as it always does.

Matching a spec against the installed version (``importlib.metadata``):

- ``git:<revision>``: the installed version's local part names that revision
  (``5.4.0rc2.post1+g3c6f7537d``; a git install of FlagGems versions itself so);
- ``X.Y.x``: the installed release starts with ``X.Y``;
- ``X.Y.Z``: the installed release is ``X.Y.Z`` (pre/post/local parts ignored).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path

from torch_fl.routing.route_table import FlagGemsMeasured, RouteTable, canonical_backend

__all__ = [
    "measured_pragma",
    "read_op_list",
    "UNMEASURED_VAR",
    "demote_unmeasured",
    "installed_flaggems_version",
    "spec_matches",
]

UNMEASURED_VAR = "FLAGOS_FLAGGEMS_UNMEASURED"
_RELEASE_RE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")
# (table file, installed version) already warned about in this process.
_warned: set[tuple[str, str]] = set()


def installed_flaggems_version() -> str | None:
    """The installed FlagGems' version, or None when it is not installed (imports nothing)."""
    for dist in ("flag_gems", "flag-gems"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _release(version: str) -> tuple[int, ...]:
    m = _RELEASE_RE.match(version)
    return tuple(int(p) for p in m.group(1).split(".")) if m else ()


def spec_matches(spec: str, installed: str) -> bool:
    """Whether ``installed`` (a version string) is what ``spec`` measured (module docstring)."""
    if spec.startswith("git:"):
        rev = spec[4:].lower()
        local = installed.partition("+")[2].lower()
        return any(
            part.startswith("g")
            and len(part) > 7
            and (part[1:].startswith(rev) or rev.startswith(part[1:]))
            for part in re.split(r"[.\-_]", local)
        )
    if spec.endswith(".x"):
        want = _release(spec[:-2])
        return bool(want) and _release(installed)[: len(want)] == want
    want = _release(spec)
    got = _release(installed)
    pad = max(len(want), len(got))
    return want + (0,) * (pad - len(want)) == got + (0,) * (pad - len(got))


def _opted_in(environ: Mapping[str, str]) -> bool:
    return environ.get(UNMEASURED_VAR, "").strip().lower() in ("1", "true", "yes", "on")


def demote_unmeasured(
    table: RouteTable,
    *,
    environ: Mapping[str, str] | None = None,
    installed: str | None = None,
) -> int:
    """Take the ``flaggems`` choice out of the preference lists of every file whose
    ``# flaggems-measured:`` pragma does not cover the installed FlagGems (``installed``; looked up
    when None). Returns how many rules were demoted; warns once per file and version."""
    env = os.environ if environ is None else environ
    if not table.flaggems_measured:
        return 0
    if installed is None:
        installed = installed_flaggems_version()
    if installed is None or _opted_in(env):
        return 0
    stale: dict[str, FlagGemsMeasured] = {
        f: m for f, m in table.flaggems_measured.items() if not spec_matches(m.spec, installed)
    }
    if not stale:
        return 0
    demoted: dict[str, int] = {}
    rules = []
    for rule in table.rules:
        measured = stale.get(rule.file)
        names = [canonical_backend(c) for c in rule.choices]
        if measured is None or "flaggems" not in names or len(names) < 2:
            rules.append(rule)
            continue
        why = (
            f"demoted: measured on {measured}, installed flag_gems is {installed} "
            f"({UNMEASURED_VAR}=1 keeps it)"
        )
        keep = tuple(c for c in rule.choices if canonical_backend(c) != "flaggems")
        rules.append(
            dataclasses.replace(
                rule,
                choices=keep,
                backend=keep[0],
                demoted=(*rule.demoted, *((c, why) for c in rule.choices if c not in keep)),
            )
        )
        demoted[rule.file] = demoted.get(rule.file, 0) + 1
    table.rules = rules
    for file, n in demoted.items():
        if (file, installed) in _warned:
            continue
        _warned.add((file, installed))
        warnings.warn(
            f"torch_fl: the flaggems routes of {file} were measured on {stale[file]}, but the "
            f"installed flag_gems is {installed}: {n} preference lists fall back to their next "
            f"choice. Set {UNMEASURED_VAR}=1 to use FlagGems for them anyway.",
            RuntimeWarning,
            stacklevel=3,
        )
    return sum(demoted.values())


def measured_pragma(gaps_json: Path) -> str | None:
    """The ``# flaggems-measured:`` pragma's text from a vendor's ``gaps.json`` (its ``measured``
    object), or None when it records no measurement. The vendors' generators share it, so every
    shipped table spells its provenance the same way."""
    m = json.loads(gaps_json.read_text(encoding="utf-8")).get("measured")
    if not m:
        return None
    text = f"flag_gems {m['flag_gems']}"
    if m.get("device"):
        text += f" on {m['device']}"
    if m.get("torch"):
        text += f", torch {m['torch']}"
    return text


def read_op_list(path: Path) -> list[str]:
    """The overload names of a checked-in list (one per line; ``#`` comments and blank lines
    skipped), sorted and unique."""
    lines = (ln.split("#", 1)[0].strip() for ln in path.read_text(encoding="utf-8").splitlines())
    return sorted({ln for ln in lines if ln})
