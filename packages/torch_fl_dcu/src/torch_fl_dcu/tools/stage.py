"""Stage DTK's device libraries into torch-fl-dcu (the bundle), build the ABI shim, check the ABI.

::

    source /opt/dtk/env.sh      # exports ROCM_PATH
    python -m torch_fl_dcu.tools.stage [--dtk-torch-lib DIR] [--dest DIR] [--update-manifest]
    python -m torch_fl_dcu.tools.stage --verify      # check an existing bundle without DTK

Steps: find DTK's torch (``--dtk-torch-lib``, else ``$FLAGOS_DCU_TORCH_LIB``, else a
``site-packages/torch/lib`` holding ``libtorch_hip.so`` under ``$ROCM_PATH``, default
``/opt/dtk``); require the installed official torch to have the same ``major.minor.patch``; copy
the device libraries (:data:`DEVICE_LIBS`) and the DT_NEEDED libraries they bring from DTK's
torch/lib that the official torch does not provide; build the ABI shim from the manifest; run the
ABI check (:mod:`torch_fl_dcu.tools.abi_check`) over the staged libraries and the plugin (core's
``torch_fl`` extension); write ``bundle.json`` with the load order. Any failure exits 1 with the
reason and leaves no ``bundle.json``, so a half-staged bundle is never loaded. DTK's driver stack
(``libgalaxyhip``, MIOpen, rocBLAS, RCCL ...) stays in ``$ROCM_PATH`` on the target.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from torch_fl_dcu import _preload
from torch_fl_dcu.elf import read_dynamic
from torch_fl_dcu.tools import abi_check
from torch_fl_dcu.tools.manifest import DEFAULT_MANIFEST, read_manifest, write_manifest
from torch_fl_dcu.tools.shim import SHIM_NAME, build_shim

__all__ = ["DEVICE_LIBS", "StageError", "find_dtk_torch_lib", "stage", "main"]

#: DTK's device libraries, in load order. libcaffe2_nvrtc.so is reached by a dlopen by soname
#: (ATen's lazy NVRTC stub), never through DT_NEEDED, so it must be mapped up front; optional.
DEVICE_LIBS = ("libcaffe2_nvrtc.so", "libc10_hip.so", "libmagma.so", "libtorch_hip.so")
REQUIRED = ("libc10_hip.so", "libtorch_hip.so")


class StageError(RuntimeError):
    pass


def find_dtk_torch_lib(explicit: str | None, rocm_path: Path) -> Path:
    if explicit:
        lib = Path(explicit)
        if not (lib / "libtorch_hip.so").exists():
            raise StageError(f"{lib} holds no libtorch_hip.so: not DTK's torch/lib")
        return lib
    found = sorted(rocm_path.glob("**/site-packages/torch/lib/libtorch_hip.so"))
    if not found:
        raise StageError(
            f"no DTK torch (site-packages/torch/lib/libtorch_hip.so) under ROCM_PATH={rocm_path}; "
            "pass --dtk-torch-lib or set FLAGOS_DCU_TORCH_LIB"
        )
    return found[0].parent


def _version(text: str, name: str) -> str | None:
    m = re.search(rf"^{name}\s*(?::[^=]*)?=\s*['\"]([^'\"]*)['\"]", text, re.M)
    return m.group(1) if m else None


def _plugin_libs() -> list[Path]:
    spec = importlib.util.find_spec("torch_fl")
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(next(iter(spec.submodule_search_locations)))
    return sorted(p for p in root.rglob("*.so") if p.is_file())


def _bundled_closure(dtk_lib: Path, official_lib: Path) -> list[str]:
    """The device libraries and the DTK torch/lib libraries they need, dependencies first."""
    order: list[str] = []
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in order or name in visiting:
            return
        visiting.add(name)
        for dep in read_dynamic(dtk_lib / name).needed:
            # Needed from DTK's torch/lib and not provided by the official torch: bundle it.
            if (dtk_lib / dep).exists() and not (official_lib / dep).exists():
                visit(dep)
        order.append(name)

    for name in DEVICE_LIBS:
        if (dtk_lib / name).exists():
            visit(name)
        elif name in REQUIRED:
            raise StageError(f"DTK's torch/lib {dtk_lib} lacks {name}")
    return order


def stage(
    dtk_lib: Path,
    dest: Path,
    official_torch: Path,
    manifest: Path = DEFAULT_MANIFEST,
    update_manifest: bool = False,
) -> dict:
    """Stages the bundle into ``dest``; returns the bundle.json content."""
    vtext = (dtk_lib.parent / "version.py").read_text(encoding="utf-8")
    vendor_version, hip = _version(vtext, "__version__"), _version(vtext, "hip")
    if not vendor_version or not hip:
        raise StageError(f"{dtk_lib.parent / 'version.py'}: not a hipified torch (no hip version)")
    base = _preload.base_version(vendor_version)
    official_version = _version((official_torch / "version.py").read_text(), "__version__") or "?"
    if _preload.base_version(official_version) != base:
        raise StageError(
            f"the official torch here is {official_version} but DTK's torch is {vendor_version}: "
            f"install torch=={base} (the +cpu wheel is enough) and stage again"
        )
    official_lib = official_torch / "lib"
    names = _bundled_closure(dtk_lib, official_lib)

    manifest_file = dest / BUNDLE_JSON
    if manifest_file.exists():
        manifest_file.unlink()  # never leave a loadable half-staged bundle
    lib_out = dest / "lib"
    if lib_out.exists():
        shutil.rmtree(lib_out)
    lib_out.mkdir(parents=True)
    for name in names:
        shutil.copy2(dtk_lib / name, lib_out / name)

    report = abi_check.check(
        [lib_out / n for n in names] + _plugin_libs(),
        abi_check.core_files(dtk_lib),
        abi_check.core_files(official_lib),
        read_manifest(manifest),
    )
    if update_manifest and report.not_in_manifest:
        header = "\n".join(
            line[2:] if line.startswith("# ") else line.lstrip("#")
            for line in manifest.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")
        )
        merged = {s.name: s for s in read_manifest(manifest)} | report.gap
        write_manifest(manifest, list(merged.values()), header)
        print(f"{manifest}: recorded {len(report.not_in_manifest)} new symbols")
    symbols = read_manifest(manifest)
    shim = build_shim(lib_out, symbols) if symbols else None
    (lib_out / "torch_fl_dcu_abi_shim.cpp").unlink(missing_ok=True)
    report = abi_check.check(
        [lib_out / n for n in names] + _plugin_libs(),
        abi_check.core_files(dtk_lib),
        abi_check.core_files(official_lib),
        symbols,
        shim if shim is not None else None,
    )
    if not report.ok:
        raise StageError(report.message())
    print(report.message())

    official_core = [n for n in abi_check.CORE_LIBS if (official_lib / n).exists()]
    data = {
        "format": 1,
        "layout": _preload.LAYOUT,
        "torch_version": base,
        "vendor_torch_version": vendor_version,
        "hip_version": hip,
        "official_core": official_core,
        "libraries": ([SHIM_NAME] if shim else []) + names,
        "shim": SHIM_NAME if shim else None,
        "shim_symbols": [s.name for s in symbols],
    }
    bundle = _preload.Bundle(
        root=dest,
        torch_version=base,
        vendor_torch_version=vendor_version,
        hip_version=hip,
        official_core=tuple(official_core),
        libraries=tuple(data["libraries"]),
        shim=data["shim"],
    )
    _preload.load_order(bundle, official_lib)  # the order this writes must pass the preload's check
    manifest_file.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return data


BUNDLE_JSON = _preload.BUNDLE_MANIFEST


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_fl_dcu.tools.stage")
    parser.add_argument("--dtk-torch-lib", default=os.environ.get("FLAGOS_DCU_TORCH_LIB"))
    parser.add_argument("--rocm-path", default=os.environ.get("ROCM_PATH", "/opt/dtk"))
    parser.add_argument("--dest", type=Path, default=None, help="default: this package's _bundle")
    parser.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    parser.add_argument("--update-manifest", action="store_true")
    parser.add_argument("--verify", action="store_true", help="check an existing bundle only")
    args = parser.parse_args(None if argv is None else list(argv))
    dest = args.dest or _preload.bundle_dir()
    try:
        official, _v, _hip = _preload.installed_torch()
        if args.verify:
            bundle = _preload.read_bundle(dest)
            if bundle is None:
                raise StageError(f"no bundle at {dest}")
            _preload.load_order(bundle, official / "lib")
            print(f"{dest}: bundle for torch {bundle.torch_version} (HIP {bundle.hip_version}) ok")
            return 0
        dtk_lib = find_dtk_torch_lib(args.dtk_torch_lib, Path(args.rocm_path))
        data = stage(dtk_lib, dest, official, args.manifest, args.update_manifest)
    except (StageError, _preload.DcuBundleError, FileNotFoundError) as exc:
        print(f"torch-fl-dcu stage: {exc}", file=sys.stderr)
        return 1
    print(
        f"staged {len(data['libraries'])} libraries into {dest} for torch {data['torch_version']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
