"""The two facts of a shared library the preload needs: its ``DT_SONAME`` and ``DT_NEEDED`` names.

Read from the ELF dynamic section with the standard library only, because this runs at interpreter
start-up (the ``.pth`` hook) on machines that need not have binutils, and before ``import torch``.
Only 64-bit little-endian ELF is read: DTK is x86_64-only. Build-time tooling that needs full
symbol tables uses ``nm`` instead (:mod:`torch_fl_dcu.tools.abi_check`).
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

__all__ = ["DynamicInfo", "ElfError", "read_dynamic"]

_DT_NULL, _DT_NEEDED, _DT_STRTAB, _DT_SONAME = 0, 1, 5, 14
_PT_LOAD, _PT_DYNAMIC = 1, 2


class ElfError(ValueError):
    """The file is not a 64-bit little-endian ELF shared object we can read."""


@dataclasses.dataclass(frozen=True)
class DynamicInfo:
    soname: str | None
    needed: tuple[str, ...]


def read_dynamic(path: str | Path) -> DynamicInfo:
    """``DT_SONAME`` and the ``DT_NEEDED`` entries (in order) of the ELF file at ``path``."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF":
        raise ElfError(f"{path}: not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ElfError(f"{path}: not a 64-bit little-endian ELF file")
    (e_phoff,) = struct.unpack_from("<Q", data, 0x20)
    e_phentsize, e_phnum = struct.unpack_from("<HH", data, 0x36)
    loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz)
    dynamic: tuple[int, int] | None = None
    for i in range(e_phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, e_phoff + i * e_phentsize
        )
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == _PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        raise ElfError(f"{path}: no dynamic section (a static executable?)")

    entries: list[tuple[int, int]] = []
    off, size = dynamic
    for pos in range(off, off + size, 16):
        tag, val = struct.unpack_from("<qQ", data, pos)
        if tag == _DT_NULL:
            break
        entries.append((tag, val))
    strtab_vaddr = next((v for t, v in entries if t == _DT_STRTAB), None)
    if strtab_vaddr is None:
        raise ElfError(f"{path}: dynamic section without DT_STRTAB")
    # DT_STRTAB is a virtual address; map it to a file offset through the PT_LOAD segments.
    strtab = None
    for vaddr, offset, filesz in loads:
        if vaddr <= strtab_vaddr < vaddr + filesz:
            strtab = strtab_vaddr - vaddr + offset
            break
    if strtab is None:
        raise ElfError(f"{path}: DT_STRTAB lies outside every loadable segment")

    def string(at: int) -> str:
        start = strtab + at
        end = data.index(b"\0", start)
        return data[start:end].decode("utf-8", "replace")

    soname = next((string(v) for t, v in entries if t == _DT_SONAME), None)
    needed = tuple(string(v) for t, v in entries if t == _DT_NEEDED)
    return DynamicInfo(soname, needed)
