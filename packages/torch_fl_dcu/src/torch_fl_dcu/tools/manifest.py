"""The ABI shim manifest (``abi/shim_symbols.txt``): reading and writing."""

from __future__ import annotations

import dataclasses
from pathlib import Path

__all__ = ["DEFAULT_MANIFEST", "ManifestError", "ShimSymbol", "read_manifest", "write_manifest"]

DEFAULT_MANIFEST = Path(__file__).resolve().parent.parent / "abi" / "shim_symbols.txt"


class ManifestError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class ShimSymbol:
    name: str
    #: "func" or "object"
    kind: str = "func"
    #: bytes, for objects
    size: int = 0


def read_manifest(path: Path = DEFAULT_MANIFEST) -> list[ShimSymbol]:
    out: list[ShimSymbol] = []
    seen: set[str] = set()
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        bad = ManifestError(
            f"{path}:{lineno}: expected '<symbol> func' or '<symbol> object <size>', got {line!r}"
        )
        if len(parts) == 2 and parts[1] == "func":
            sym = ShimSymbol(parts[0])
        elif len(parts) == 3 and parts[1] == "object" and parts[2].isdigit():
            sym = ShimSymbol(parts[0], "object", int(parts[2]))
        else:
            raise bad
        if not all(c.isalnum() or c in "_$." for c in sym.name):
            raise ManifestError(f"{path}:{lineno}: {sym.name!r} is not a symbol name")
        if sym.name in seen:
            raise ManifestError(f"{path}:{lineno}: {sym.name} is listed twice")
        seen.add(sym.name)
        out.append(sym)
    return out


def write_manifest(path: Path, symbols: list[ShimSymbol], header: str) -> None:
    lines = [f"# {h}" if h else "#" for h in header.splitlines()]
    for s in sorted(symbols, key=lambda s: s.name):
        lines.append(f"{s.name} func" if s.kind == "func" else f"{s.name} object {s.size}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
