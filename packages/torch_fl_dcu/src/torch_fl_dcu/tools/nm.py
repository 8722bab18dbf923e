"""Dynamic symbol tables through binutils' ``nm -D`` (build-time tooling only)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

__all__ = ["defined", "demangle", "undefined"]

#: nm type letters of defined dynamic symbols that are code (the rest are data).
FUNCTION_TYPES = frozenset("TtWwi")


def _nm(path: Path, *flags: str) -> list[list[str]]:
    nm = shutil.which("nm")
    if nm is None:
        raise RuntimeError("the ABI tooling needs binutils' nm on PATH")
    out = subprocess.run(
        [nm, "-D", *flags, str(path)], check=True, capture_output=True, text=True
    ).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


def _name(sym: str) -> str:
    return sym.split("@", 1)[0]  # versioned symbols: name@VERSION / name@@VERSION


def defined(path: Path) -> dict[str, tuple[str, int]]:
    """{symbol: (nm type letter, size)} of the symbols ``path`` exports."""
    out: dict[str, tuple[str, int]] = {}
    for parts in _nm(path, "--defined-only", "-S"):
        # "addr size type name" (size absent for some symbols: "addr type name")
        if len(parts) == 4:
            out[_name(parts[3])] = (parts[2], int(parts[1], 16))
        elif len(parts) == 3:
            out[_name(parts[2])] = (parts[1], 0)
    return out


def undefined(path: Path) -> set[str]:
    """The symbols ``path`` imports (weak undefined ones included)."""
    return {_name(p[-1]) for p in _nm(path, "--undefined-only") if p}


def demangle(names: list[str]) -> dict[str, str]:
    """{mangled: readable} through c++filt when it exists (else the names unchanged)."""
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return {n: n for n in names}
    out = subprocess.run(
        [tool], input="\n".join(names), check=True, capture_output=True, text=True
    ).stdout.splitlines()
    return dict(zip(names, out, strict=False)) if len(out) == len(names) else {n: n for n in names}
