"""Fixtures of the dcu package's tests: small shared libraries built here with the host compiler
(right sonames, exported and imported symbols, DT_NEEDED chains) standing in for DTK's device
libraries, DTK's forked core and the official core; and fake bundle layouts over them. No DTK, HIP
or DCU is needed: these tests run on every CI machine."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CXX = shutil.which("g++") or shutil.which("c++")
#: A symbol DTK's core exports and the official core lacks (shaped like DTK's fused-op wrappers,
#: named so nobody mistakes it for a real one).
FUSE = "_ZN2at4_ops22native_fuse_test_dummy4callEv"
HIP_VERSION = "6.3.99999-test"


def torch_dir() -> Path:
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def torch_base_version() -> str:
    import re

    text = (torch_dir() / "version.py").read_text()
    return re.search(r"__version__\s*=\s*'(\d+\.\d+\.\d+)", text).group(1)


def build_lib(
    out: Path,
    source: str,
    soname: str | None = None,
    needed: list[Path] | None = None,
) -> Path:
    """Compiles ``source`` (C) into ``out``; ``needed``: libraries linked by path (each becomes a
    DT_NEEDED entry of its soname)."""
    if CXX is None:
        pytest.skip("no C/C++ compiler on this machine")
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".c")
    src.write_text(source)
    cmd = [CXX, "-x", "c", "-shared", "-fPIC", "-o", str(out), str(src),
           f"-Wl,-soname,{soname or out.name}", "-Wl,--no-as-needed"]  # fmt: skip
    for lib in needed or []:
        cmd += [f"-L{lib.parent}", f"-l:{lib.name}"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    src.unlink()
    return out


def make_device_libs(lib: Path, core: Path) -> dict[str, Path]:
    """Fake DTK device libraries in ``lib``: libc10_hip.so (needs libc10.so), libmagma.so,
    libtorch_hip.so (needs libc10_hip.so and libc10.so, imports FUSE from the shim). ``core``:
    a directory whose libc10.so they link against (its soname is what counts)."""
    c10_hip = build_lib(
        lib / "libc10_hip.so",
        "int tfl_fake_c10_hip(void) { return 1; }\n",
        needed=[core / "libc10.so"],
    )
    magma = build_lib(lib / "libmagma.so", "int tfl_fake_magma(void) { return 2; }\n")
    torch_hip = build_lib(
        lib / "libtorch_hip.so",
        f"void {FUSE}(void);\n"
        "int tfl_fake_torch_hip_loaded = 1;\n"
        f"void tfl_fake_torch_hip_uses_shim(void) {{ {FUSE}(); }}\n",
        needed=[c10_hip, core / "libc10.so"],
    )
    return {"c10_hip": c10_hip, "magma": magma, "torch_hip": torch_hip}


def make_shim(lib: Path, symbols: list[str]) -> Path:
    from torch_fl_dcu.tools.manifest import ShimSymbol
    from torch_fl_dcu.tools.shim import build_shim

    path = build_shim(lib, [ShimSymbol(s) for s in symbols])
    (lib / "torch_fl_dcu_abi_shim.cpp").unlink()
    return path


@pytest.fixture(scope="session")
def bundle_template(tmp_path_factory) -> Path:
    """A complete fake bundle for the installed torch; tests copy it and break the copy."""
    root = tmp_path_factory.mktemp("bundle")
    lib = root / "lib"
    make_device_libs(lib, torch_dir() / "lib")
    make_shim(lib, [FUSE])
    write_bundle_json(root)
    return root


def write_bundle_json(root: Path, **changes) -> None:
    data = {
        "format": 1,
        "layout": "device-libs",
        "torch_version": torch_base_version(),
        "vendor_torch_version": torch_base_version() + "+das.test",
        "hip_version": HIP_VERSION,
        "official_core": ["libc10.so", "libtorch_cpu.so", "libtorch.so"],
        "libraries": [
            "libtorch_fl_dcu_abi_shim.so",
            "libc10_hip.so",
            "libmagma.so",
            "libtorch_hip.so",
        ],
        "shim": "libtorch_fl_dcu_abi_shim.so",
        "shim_symbols": [FUSE],
    }
    data.update(changes)
    (root / "bundle.json").write_text(json.dumps(data, indent=1))


@pytest.fixture
def bundle(bundle_template, tmp_path) -> Path:
    dest = tmp_path / "bundle"
    shutil.copytree(bundle_template, dest)
    return dest


def run_python(
    code: str,
    bundle: Path | None = None,
    env: dict[str, str] | None = None,
    no_site: bool = False,
) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh interpreter (the preload is per process and must precede torch)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("FLAGOS_")}
    full["FLAGOS_DCU_BUNDLE"] = str(bundle) if bundle is not None else "/nonexistent-dcu-bundle"
    full.update(env or {})
    args = [sys.executable]
    if no_site:
        # No .pth hooks: the start-up preload does not run. site-packages by hand instead.
        import site

        args.append("-S")
        paths = [*site.getsitepackages(), full.get("PYTHONPATH", "")]
        full["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return subprocess.run(
        [*args, "-c", code], capture_output=True, text=True, env=full, timeout=240
    )


def pth_installed() -> bool:
    import site

    return any((Path(p) / "torch_fl_dcu.pth").exists() for p in site.getsitepackages())
