"""Version compatibility between torch, torch-fl-core and vendor packages, checked at import.

Three things must agree, and a mismatch is one :class:`VersionMismatchError` naming both versions
and the fix, raised before anything could fail in a less readable way:

- **torch minor**: a compiled package (torch-fl-core, torch-fl-gcu) is built against one torch
  minor's headers and libraries; its wheel requires that minor (``torch>=2.X,<2.X+1``) and records
  it in ``<package>/_torch_build.py``. :func:`check_torch_build` compares it with the running
  torch before the package loads its extension (which would otherwise fail with an undefined
  symbol, or run against a different ABI).
- **core version**: a vendor package declares the torch-fl-core versions it works with in its
  requirements (``torch-fl-core>=0.1,<0.2``); :func:`check_vendor` compares them with the
  installed core when the vendor is discovered.
- **vendor API level**: :data:`API_LEVEL` is the level of the Python vendor interface this core
  provides (:class:`torch_fl.vendors.Vendor`), :data:`MIN_API_LEVEL` the oldest it still
  supports; a vendor states the level it is written for (``Vendor.api_level``).

The C runtime ABI has its own rule (a table of at least the v1.0 size; later fields used only
where ``struct_size`` covers them): docs/runtime-abi.md.
"""

from __future__ import annotations

import importlib.metadata
import re
from types import ModuleType
from typing import Any

__all__ = [
    "API_LEVEL",
    "MIN_API_LEVEL",
    "VersionMismatchError",
    "check_torch_build",
    "check_vendor",
    "satisfies",
]

#: The Python vendor API level this core provides. Raised when core adds to
#: :class:`torch_fl.vendors.Vendor` something a vendor may rely on.
API_LEVEL = 1
#: The oldest vendor API level this core still serves.
MIN_API_LEVEL = 1

CORE_DIST = "torch-fl-core"


class VersionMismatchError(ImportError):
    """Installed torch-fl packages (or torch) are of versions that do not work together."""


def _minor(version: str) -> tuple[int, int]:
    parts = re.match(r"(\d+)\.(\d+)", version)
    if parts is None:
        raise ValueError(f"not a version: {version!r}")
    return int(parts.group(1)), int(parts.group(2))


def check_torch_build(dist: str, build: ModuleType | None) -> None:
    """Raise if the running torch is not the minor ``dist``'s compiled code was built for.

    ``build`` is the package's ``_torch_build`` module (None where the package has none: a
    source tree that was never built, which then fails to load its extension as before).
    """
    if build is None:
        return
    import torch

    built = str(build.TORCH_MINOR)
    running = torch.__version__
    if _minor(running) == _minor(built):
        return
    raise VersionMismatchError(
        f"{dist} {_dist_version(dist)} was built for torch {built}, but this interpreter runs "
        f"torch {running}. Install the {dist} wheel built for torch "
        f"{'.'.join(map(str, _minor(running)))} (or torch {built}.*: pip install "
        f"'torch=={built}.*'), or rebuild it from source against this torch: pip install "
        f"--no-build-isolation <{dist} source dir>"
    )


def _dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


# ---- requirement specifiers: the subset pyproject.toml files use ------------------------------

_CLAUSE = re.compile(r"\s*(==|!=|>=|<=|~=|>|<)\s*([0-9][0-9a-zA-Z.+*-]*)\s*")
#: PEP 440 arbitrary equality (``===X``): the version string itself, compared case-insensitively.
_ARBITRARY = re.compile(r"\s*===\s*([^\s,;]+)\s*")


def _release(version: str) -> tuple[int, ...]:
    numbers = re.match(r"\d+(?:\.\d+)*", version.split("+", 1)[0])
    if numbers is None:
        raise ValueError(f"not a version: {version!r}")
    return tuple(int(n) for n in numbers.group(0).split("."))


def _pad(a: tuple[int, ...], n: int) -> tuple[int, ...]:
    return a + (0,) * (n - len(a))


def _compare(version: str, op: str, bound: str) -> bool:
    if bound.endswith(".*"):
        prefix = _release(bound[:-2])
        head = _pad(_release(version), len(prefix))[: len(prefix)]
        return (head == prefix) if op == "==" else (head != prefix)
    v, b = _release(version), _release(bound)
    n = max(len(v), len(b))
    v, b = _pad(v, n), _pad(b, n)
    if op == "~=":
        keep = max(1, len(_release(bound)) - 1)
        return v >= b and v[:keep] == b[:keep]
    return {
        "==": v == b,
        "!=": v != b,
        ">=": v >= b,
        "<=": v <= b,
        ">": v > b,
        "<": v < b,
    }[op]


def satisfies(version: str, specifier: str) -> bool:
    """Whether ``version`` meets ``specifier`` (``">=0.1,<0.2"``; empty: any version)."""
    clauses = [c for c in specifier.split(",") if c.strip()]
    for clause in clauses:
        arbitrary = _ARBITRARY.fullmatch(clause)
        if arbitrary is not None:
            if version.strip().lower() != arbitrary.group(1).lower():
                return False
            continue
        m = _CLAUSE.fullmatch(clause)
        if m is None:
            raise ValueError(f"unsupported version specifier {clause!r}")
        if not _compare(version, m.group(1), m.group(2)):
            return False
    return True


def _core_specifier(dist: importlib.metadata.Distribution) -> str | None:
    """The torch-fl-core specifier among ``dist``'s requirements (None: it names none)."""
    for req in dist.requires or []:
        if ";" in req:  # an environment marker: extras and platform conditions are not ours
            req, marker = req.split(";", 1)
            if "extra" in marker:
                continue
        m = re.match(r"\s*([A-Za-z0-9_.-]+)\s*(?:\[[^\]]*\])?\s*\(?([^)]*)\)?\s*$", req)
        if m and re.sub(r"[-_.]+", "-", m.group(1)).lower() == CORE_DIST:
            return m.group(2).strip()
    return None


def check_vendor(vendor: Any, dist: importlib.metadata.Distribution | None) -> None:
    """Raise if the vendor (from distribution ``dist``) does not work with this core."""
    name = getattr(vendor, "name", "?")
    label = f"{dist.name} {dist.version}" if dist is not None else f"vendor {name!r}"
    core = _dist_version(CORE_DIST)
    level = getattr(vendor, "api_level", MIN_API_LEVEL)
    # bool is an int subclass, and int() would take "1" or 1.5: only a real int states a level.
    if not isinstance(level, int) or isinstance(level, bool):
        raise VersionMismatchError(
            f"{label}: vendor {name!r} declares api_level = {level!r}, but api_level must be an "
            f"int (the torch-fl vendor API level it is written for, {MIN_API_LEVEL}..{API_LEVEL} "
            f"here): set api_level = {API_LEVEL} in its Vendor class, or install a fixed release "
            f"of the vendor package"
        )
    if level > API_LEVEL:
        raise VersionMismatchError(
            f"{label} is written for torch-fl vendor API level {level}, and {CORE_DIST} {core} "
            f"provides level {API_LEVEL}: upgrade torch-fl-core (pip install -U torch-fl-core)"
        )
    if level < MIN_API_LEVEL:
        raise VersionMismatchError(
            f"{label} is written for torch-fl vendor API level {level}, which {CORE_DIST} {core} "
            f"no longer serves (levels {MIN_API_LEVEL}..{API_LEVEL}): upgrade the vendor package "
            f"(pip install -U {dist.name if dist is not None else 'the vendor package'})"
        )
    if dist is None or core == "(not installed)":
        return
    spec = _core_specifier(dist)
    if spec and not satisfies(core, spec):
        raise VersionMismatchError(
            f"{label} requires {CORE_DIST}{spec}, but {CORE_DIST} {core} is installed: "
            f"pip install '{CORE_DIST}{spec}' (or install the {dist.name} release made for "
            f"{CORE_DIST} {core})"
        )
