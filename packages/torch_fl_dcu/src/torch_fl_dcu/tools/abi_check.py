"""The ABI check of a DTK bundle: every DTK-core-only symbol it imports is in the shim manifest.

::

    python -m torch_fl_dcu.tools.abi_check --vendor-core DTK_TORCH_LIB --official-core TORCH_LIB \\
        --manifest abi/shim_symbols.txt [--shim libtorch_fl_dcu_abi_shim.so] CONSUMER.so ...

The gap is ``(undefined symbols of the consumers: bundled device libraries and the plugin)
∩ (exports of DTK's core: libc10.so, libtorch_cpu.so, libtorch.so) − (exports of the official
core)``. The check fails, naming each symbol, when the gap is not a subset of the manifest, or
(with ``--shim``) not exported by the built shim. It recomputes the gap from the binaries rather
than trusting the checked-in list, so a DTK release that adds an import fails the bundle build
with the symbol named instead of failing ``import torch`` with a mangled undefined symbol.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterable
from pathlib import Path

from torch_fl_dcu.tools import nm
from torch_fl_dcu.tools.manifest import DEFAULT_MANIFEST, ShimSymbol, read_manifest

__all__ = ["CORE_LIBS", "AbiReport", "check", "core_files", "main"]

#: The core libraries of a torch wheel (the rest of torch/lib is device or third-party code).
CORE_LIBS = ("libc10.so", "libtorch_cpu.so", "libtorch.so")


@dataclasses.dataclass
class AbiReport:
    #: symbol -> ShimSymbol (kind/size as DTK's core exports it)
    gap: dict[str, ShimSymbol]
    #: gap symbols the manifest lacks
    not_in_manifest: list[str]
    #: gap symbols the built shim does not export (empty without --shim)
    not_in_shim: list[str]

    @property
    def ok(self) -> bool:
        return not self.not_in_manifest and not self.not_in_shim

    def message(self) -> str:
        if self.ok:
            return (
                f"DCU core ABI check passed: {len(self.gap)} DTK-core-only imports are covered "
                f"by the ABI shim manifest"
            )
        readable = nm.demangle(sorted({*self.not_in_manifest, *self.not_in_shim}))
        lines = ["DCU core ABI check FAILED:"]
        if self.not_in_manifest:
            lines.append(
                f"  {len(self.not_in_manifest)} symbols exported by DTK's core and not by the "
                f"official core are imported by the bundle or plugin but missing from the shim "
                f"manifest (add them to abi/shim_symbols.txt, or run the staging tool with "
                f"--update-manifest):"
            )
            lines += [f"    {s}  ({readable[s]})" for s in self.not_in_manifest]
        if self.not_in_shim:
            lines.append(
                f"  {len(self.not_in_shim)} gap symbols are not exported by the built shim "
                f"(rebuild it: python -m torch_fl_dcu.tools.shim):"
            )
            lines += [f"    {s}  ({readable[s]})" for s in self.not_in_shim]
        return "\n".join(lines)


def core_files(lib_dir: Path) -> list[Path]:
    files = [lib_dir / n for n in CORE_LIBS if (lib_dir / n).exists()]
    if not files:
        raise FileNotFoundError(f"{lib_dir} holds none of the torch core libraries {CORE_LIBS}")
    return files


def check(
    consumers: Iterable[Path],
    vendor_core: Iterable[Path],
    official_core: Iterable[Path],
    manifest: Iterable[ShimSymbol],
    shim: Path | None = None,
) -> AbiReport:
    imports: set[str] = set()
    for path in consumers:
        imports |= nm.undefined(path)
    vendor: dict[str, tuple[str, int]] = {}
    for path in vendor_core:
        vendor.update(nm.defined(path))
    official: set[str] = set()
    for path in official_core:
        official |= set(nm.defined(path))
    gap = {}
    for name in sorted((imports & set(vendor)) - official):
        letter, size = vendor[name]
        kind = "func" if letter in nm.FUNCTION_TYPES else "object"
        gap[name] = ShimSymbol(name, kind, size if kind == "object" else 0)
    listed = {s.name for s in manifest}
    exported = set(nm.defined(shim)) if shim is not None else set(gap)
    return AbiReport(
        gap=gap,
        not_in_manifest=[s for s in gap if s not in listed],
        not_in_shim=[s for s in gap if s not in exported],
    )


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_fl_dcu.tools.abi_check")
    parser.add_argument("consumers", nargs="+", type=Path)
    parser.add_argument("--vendor-core", required=True, type=Path, help="DTK torch's lib dir")
    parser.add_argument("--official-core", required=True, type=Path, help="official torch/lib")
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--shim", type=Path, default=None)
    args = parser.parse_args(None if argv is None else list(argv))
    report = check(
        args.consumers,
        core_files(args.vendor_core),
        core_files(args.official_core),
        read_manifest(args.manifest),
        args.shim,
    )
    print(report.message(), file=sys.stdout if report.ok else sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
