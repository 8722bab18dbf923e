"""Loading the bundled DTK device libraries onto the official torch, before ``import torch``.

On the official (CPU) torch wheel, DTK's HIP kernels come from the device libraries this wheel
bundles (``libc10_hip.so``, ``libmagma.so``, ``libtorch_hip.so`` ...). Their static initialisers
register the kernels under the CUDA dispatch key and torch's CUDA hooks, so they must be mapped
RTLD_GLOBAL before ``import torch``: PyTorch caches its CUDA hooks at first import, and libraries
loaded later register kernels that device initialisation cannot reach. Order matters too:

1. the official core (``libc10.so``, ``libtorch_cpu.so``, ``libtorch.so`` from the installed
   torch), loaded by path first, so the device libraries' ``DT_NEEDED`` on them resolve by soname
   to the very objects ``import torch`` maps a moment later (no second copy, no double static init);
2. the ABI shim, before anything that imports the symbols it defines (``libtorch_hip.so``);
3. each bundled library after every bundled library it names in ``DT_NEEDED``.

Everything here is checked before the first ``dlopen`` and every failure is a
:class:`DcuBundleError` that says what to do: a missing file, a wrong order, an installed torch
whose ``major.minor.patch`` differs from the bundle's (dlopen would accept it silently: the symbol
names match), or torch already imported. Nothing in the torch installation is modified; the only
change to torch is ``torch.version.hip``, set on the imported module (never on disk) to the
bundle's HIP version as the ``torch.version`` module loads.

This module uses the standard library only: it runs from the ``.pth`` start-up hook.
"""

from __future__ import annotations

import ctypes
import dataclasses
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

from torch_fl_dcu.elf import ElfError, read_dynamic

__all__ = [
    "BUNDLE_MANIFEST",
    "DcuBundleError",
    "DcuManifestError",
    "Bundle",
    "PreloadState",
    "bundle_dir",
    "installed_torch",
    "load_order",
    "preload",
    "read_bundle",
    "state",
]

#: Directory of a bundle to load instead of the one inside this package (development and tests).
ENV_BUNDLE = "FLAGOS_DCU_BUNDLE"
#: "0": the bundle is never loaded (start-up hook and ``import torch_fl_dcu`` alike); the vendor
#: then reports no device, saying so. Also what lets the staging tools run over a broken bundle.
ENV_PRELOAD = "FLAGOS_DCU_PRELOAD"
BUNDLE_MANIFEST = "bundle.json"
#: The one bundle layout this package loads: DTK's device libraries on the official core.
LAYOUT = "device-libs"
_PACKAGE_BUNDLE = Path(__file__).resolve().parent / "_bundle"


class DcuBundleError(ImportError):
    """The DTK bundle cannot be loaded into this process; the message says how to fix it."""


class DcuManifestError(DcuBundleError):
    """``bundle.json`` cannot be used: unreadable, not a JSON object, or a field of the wrong type
    (the message names the file and the field). The start-up hook warns about it."""


@dataclasses.dataclass(frozen=True)
class Bundle:
    """A staged bundle: ``bundle.json`` and the libraries under ``lib/``."""

    root: Path
    #: ``major.minor.patch`` of the official torch DTK's torch was built from (``2.10.0``).
    torch_version: str
    #: DTK torch's own version string (``2.10.0+das.opt1.dtk2604``), for messages.
    vendor_torch_version: str
    #: What ``torch.version.hip`` reports once the bundle is loaded.
    hip_version: str
    #: Sonames loaded from the installed torch's ``lib/`` first, in order.
    official_core: tuple[str, ...]
    #: Files under ``lib/`` loaded next, in order.
    libraries: tuple[str, ...]
    #: The ABI shim's file name (one of ``libraries``), or None for a bundle that needs none.
    shim: str | None
    #: Symbols the shim defines (``abi/shim_symbols.txt`` at staging time), for error messages.
    shim_symbols: tuple[str, ...] = ()

    @property
    def lib(self) -> Path:
        return self.root / "lib"


@dataclasses.dataclass
class PreloadState:
    """What the preload did in this process."""

    #: "loaded" (bundle mapped), "native" (DTK's own hipified torch is installed: nothing to load),
    #: "absent" (no bundle), "disabled" (FLAGOS_DCU_PRELOAD=0), or "failed" (``error`` says why).
    status: str
    detail: str
    bundle: Bundle | None = None
    loaded: tuple[Path, ...] = ()
    error: DcuBundleError | None = None


_state: PreloadState | None = None


def state() -> PreloadState | None:
    """The preload's outcome in this process, or None if it has not run."""
    return _state


def bundle_dir() -> Path:
    env = os.environ.get(ENV_BUNDLE)
    return Path(env).expanduser().resolve() if env else _PACKAGE_BUNDLE


#: How to fix a bundle this package cannot use.
RESTAGE = (
    "Re-stage the bundle (FLAGOS_DCU_PRELOAD=0 python -m torch_fl_dcu.tools.stage) or reinstall "
    "torch-fl-dcu; FLAGOS_DCU_PRELOAD=0 runs without it"
)


def _kind(value: object) -> str:
    """What a JSON value is, for messages: ``a string ('libmagma.so')``, ``null``, ``a list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class _Manifest:
    """The fields of one ``bundle.json``, each checked for its type as it is read."""

    def __init__(self, path: Path, data: dict) -> None:
        self.path, self.data = path, data

    def error(self, field: str, detail: str) -> DcuManifestError:
        return DcuManifestError(
            f"torch-fl-dcu: the DTK bundle manifest {self.path}: the field {field!r} {detail}. "
            f"{RESTAGE}."
        )

    def _get(self, field: str, default: object) -> object:
        if field in self.data:
            return self.data[field]
        if default is _REQUIRED:
            raise DcuManifestError(
                f"torch-fl-dcu: the DTK bundle manifest {self.path} lacks the field {field!r}. "
                f"{RESTAGE}."
            )
        return default

    def string(self, field: str, what: str, default: object = None) -> str:
        value = self._get(field, default)
        if not isinstance(value, str) or not value:
            raise self.error(field, f"must be {what}, not {_kind(value)}")
        return value

    def optional_string(self, field: str, what: str) -> str | None:
        value = self._get(field, None)
        if value is not None and (not isinstance(value, str) or not value):
            raise self.error(field, f"must be {what} or null, not {_kind(value)}")
        return value

    def names(self, field: str, what: str, default: object = None) -> tuple[str, ...]:
        value = self._get(field, default)
        if not isinstance(value, list):
            raise self.error(field, f"must be a list of {what}, not {_kind(value)}")
        for item in value:
            if not isinstance(item, str) or not item:
                raise self.error(field, f"must be a list of {what}; it holds {_kind(item)}")
        return tuple(value)


_REQUIRED = object()


def read_bundle(root: Path | None = None) -> Bundle | None:
    """The bundle at ``root`` (default :func:`bundle_dir`), or None when it has no manifest.

    Raises :class:`DcuManifestError` for a manifest that cannot be read, is not a JSON object, or
    has a field of the wrong type; the message names the file, the field and the fix."""
    root = bundle_dir() if root is None else root
    path = root / BUNDLE_MANIFEST
    if not path.exists():
        return None
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise DcuManifestError(
            f"torch-fl-dcu: cannot read the DTK bundle manifest {path}: {exc.strerror or exc}. "
            f"{RESTAGE}."
        ) from None
    except UnicodeDecodeError as exc:
        raise DcuManifestError(
            f"torch-fl-dcu: the DTK bundle manifest {path} is not UTF-8 text (byte "
            f"{exc.object[exc.start]:#04x} at offset {exc.start}). {RESTAGE}."
        ) from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DcuManifestError(
            f"torch-fl-dcu: the DTK bundle manifest {path} is not valid JSON ({exc}). {RESTAGE}."
        ) from None
    if not isinstance(data, dict):
        raise DcuManifestError(
            f"torch-fl-dcu: the DTK bundle manifest {path} is not a JSON object (it holds "
            f"{_kind(data)}); it must be the object "
            f"python -m torch_fl_dcu.tools.stage writes. {RESTAGE}."
        )
    fields = _Manifest(path, data)
    layout = data.get("layout", LAYOUT)
    if layout != LAYOUT:
        raise DcuBundleError(
            f"torch-fl-dcu: the DTK bundle at {root} has layout {layout!r} (the field 'layout' "
            f"of {path}); this torch-fl-dcu loads the {LAYOUT!r} layout only (DTK's device "
            f"libraries on the official torch core). Re-stage it: FLAGOS_DCU_PRELOAD=0 python -m "
            f"torch_fl_dcu.tools.stage"
        )
    what = "the official torch version the bundle is for, major.minor.patch ('2.10.0')"
    torch_version = fields.string("torch_version", what, _REQUIRED)
    if not re.fullmatch(r"\d+\.\d+\.\d+", torch_version):
        raise fields.error("torch_version", f"must be {what}, not {torch_version!r}")
    return Bundle(
        root=root,
        torch_version=torch_version,
        vendor_torch_version=fields.string(
            "vendor_torch_version",
            "DTK torch's version string ('2.10.0+das.opt1.dtk2604')",
            torch_version,
        ),
        hip_version=fields.string(
            "hip_version", "a string (the HIP version, '6.3.26113')", _REQUIRED
        ),
        official_core=fields.names("official_core", "file names", _REQUIRED),
        libraries=fields.names("libraries", "file names", _REQUIRED),
        shim=fields.optional_string("shim", "a file name"),
        shim_symbols=fields.names("shim_symbols", "symbol names", []),
    )


def _version_field(text: str, name: str) -> str | None:
    m = re.search(rf"^{name}\s*(?::[^=]*)?=\s*(?P<v>'[^']*'|\"[^\"]*\"|None)", text, re.M)
    if not m or m.group("v") == "None":
        return None
    return m.group("v")[1:-1]


def installed_torch() -> tuple[Path, str, str | None]:
    """(torch package dir, ``__version__``, ``version.hip``) of the torch this interpreter would
    import, read from ``torch/version.py`` without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise DcuBundleError(
            "torch-fl-dcu: torch is not installed; install the official torch wheel of the "
            "version the DTK bundle was built for"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    text = (root / "version.py").read_text(encoding="utf-8")
    version = _version_field(text, "__version__") or "unknown"
    return root, version, _version_field(text, "hip")


def base_version(version: str) -> str:
    """``2.10.0`` for ``2.10.0+cpu`` or ``2.10.0+das.opt1.dtk2604``."""
    m = re.match(r"\d+\.\d+\.\d+", version)
    return m.group(0) if m else version


def load_order(bundle: Bundle, torch_lib: Path) -> list[Path]:
    """Every library to load, in order, after checking the files exist and the order is one the
    loader can satisfy (each bundled library after the bundled libraries it needs)."""
    paths: list[Path] = []
    for name in bundle.official_core:
        path = torch_lib / name
        if not path.exists():
            raise DcuBundleError(
                f"torch-fl-dcu: the official torch core library {name} is missing from "
                f"{torch_lib}; the DTK bundle runs on the official torch core. Reinstall torch "
                f"{bundle.torch_version}."
            )
        paths.append(path)
    sonames: dict[str, str] = {}  # soname -> file name, of the bundled libraries
    needs: dict[str, tuple[str, ...]] = {}
    for name in bundle.libraries:
        path = bundle.lib / name
        if not path.exists():
            raise DcuBundleError(
                f"torch-fl-dcu: the DTK bundle is incomplete: {name} (listed in "
                f"{bundle.root / BUNDLE_MANIFEST}) is missing from {bundle.lib}. Reinstall "
                f"torch-fl-dcu, or re-stage the bundle: FLAGOS_DCU_PRELOAD=0 python -m torch_fl_dcu.tools.stage"
            )
        try:
            info = read_dynamic(path)
        except (ElfError, OSError) as exc:
            raise DcuBundleError(f"torch-fl-dcu: the DTK bundle is damaged: {exc}") from None
        sonames[info.soname or name] = name
        needs[name] = info.needed
        paths.append(path)
    position = {name: i for i, name in enumerate(bundle.libraries)}
    for name in bundle.libraries:
        for dep in needs[name]:
            provider = sonames.get(dep)
            if provider is not None and position[provider] > position[name]:
                raise DcuBundleError(
                    f"torch-fl-dcu: wrong load order in {bundle.root / BUNDLE_MANIFEST}: {name} "
                    f"is listed before {provider}, which it needs (DT_NEEDED {dep}). Re-stage the "
                    f"bundle (FLAGOS_DCU_PRELOAD=0 python -m torch_fl_dcu.tools.stage) rather than editing the order."
                )
    if bundle.shim is not None:
        if bundle.shim not in position:
            raise DcuBundleError(
                f"torch-fl-dcu: {bundle.root / BUNDLE_MANIFEST} names the ABI shim {bundle.shim} "
                f"but does not list it among the libraries to load; re-stage the bundle"
            )
        # The shim defines symbols DTK's core exports and the official core lacks: every
        # library after it may import them, and nothing names the shim in DT_NEEDED.
        if position[bundle.shim] != 0:
            first = bundle.libraries[0]
            raise DcuBundleError(
                f"torch-fl-dcu: wrong load order in {bundle.root / BUNDLE_MANIFEST}: the ABI shim "
                f"{bundle.shim} must load before {first} (the device libraries import the "
                f"symbols it defines). Re-stage the bundle: FLAGOS_DCU_PRELOAD=0 python -m torch_fl_dcu.tools.stage"
            )
    return paths


def _dlopen(path: Path, bundle: Bundle) -> None:
    try:
        # RTLD_NOW: an unresolved symbol fails here, naming it, not at its first call.
        ctypes.CDLL(str(path), mode=os.RTLD_GLOBAL | os.RTLD_NOW)
    except OSError as exc:
        text = str(exc)
        hint = ""
        m = re.search(r"undefined symbol: (\S+)", text)
        if m and m.group(1) in bundle.shim_symbols:
            hint = (
                f" {m.group(1)} is defined by the ABI shim "
                f"({bundle.shim or 'not in this bundle.json'}), which must load before "
                f"{path.name}; re-stage the bundle (FLAGOS_DCU_PRELOAD=0 python -m "
                f"torch_fl_dcu.tools.stage)."
            )
        elif m:
            hint = (
                f" {m.group(1)} is exported by neither the official torch "
                f"{bundle.torch_version} core nor the bundle: DTK's core exports it and the ABI "
                f"shim manifest lacks it. Re-run the ABI check "
                f"(python -m torch_fl_dcu.tools.abi_check) and add it to abi/shim_symbols.txt."
            )
        elif "cannot open shared object file" in text:
            hint = (
                " A library it needs is neither bundled nor on the loader path; DTK's driver "
                "libraries come from $ROCM_PATH (source DTK's env.sh, or check LD_LIBRARY_PATH)."
            )
        raise DcuBundleError(
            f"torch-fl-dcu: loading the DTK bundle failed at {path}: {text}.{hint}"
        ) from None


class _HipVersionLoader(importlib.abc.Loader):
    """Runs ``torch.version``'s own loader, then sets ``hip`` on the module it made."""

    def __init__(self, inner: importlib.abc.Loader, hip: str) -> None:
        self._inner, self._hip = inner, hip

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return self._inner.create_module(spec)

    def exec_module(self, module) -> None:  # type: ignore[no-untyped-def]
        self._inner.exec_module(module)
        module.hip = self._hip

    def __getattr__(self, name: str):  # get_source, get_code ... of the real loader
        return getattr(self._inner, name)


class _HipVersionFinder(importlib.abc.MetaPathFinder):
    """Reports the bundle's HIP version as ``torch.version.hip``: the official wheel's
    ``version.py`` says ``hip = None``, and Triton's hcu backend and FlagGems' hygon vendor
    switch themselves off on that. Set on the module as it loads, before torch reads it."""

    def __init__(self, hip: str) -> None:
        self.hip = hip

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname != "torch.version":
            return None
        sys.meta_path.remove(self)  # once; and so the lookup below finds the real spec
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _HipVersionLoader(spec.loader, self.hip)
        return spec


def _load(bundle: Bundle) -> PreloadState:
    torch_dir, version, _hip = installed_torch()
    if base_version(version) != bundle.torch_version:
        raise DcuBundleError(
            f"torch-fl-dcu: the installed torch is {version} but the DTK bundle was built for "
            f"torch {bundle.torch_version} (DTK torch {bundle.vendor_torch_version}). dlopen "
            f"would accept the pair silently and results would be wrong later. Install "
            f"torch=={bundle.torch_version} (the +cpu wheel is enough), or a torch-fl-dcu "
            f"built for torch {base_version(version)}."
        )
    if "torch" in sys.modules:
        raise DcuBundleError(
            "torch-fl-dcu: torch was imported before the DTK bundle could load. PyTorch caches "
            "its CUDA hooks at first import, so DTK kernels loaded now would be unreachable from "
            "device initialisation. In a fresh process, import torch_fl_dcu before torch (the "
            "start-up hook torch_fl_dcu.pth does it where torch-fl-dcu is installed and .pth files "
            f"run, i.e. not under python -S), or set {ENV_PRELOAD}=0 to run without the bundle."
        )
    paths = load_order(bundle, torch_dir / "lib")
    for path in paths:
        _dlopen(path, bundle)
    sys.meta_path.insert(0, _HipVersionFinder(bundle.hip_version))
    return PreloadState(
        "loaded",
        f"DTK bundle ({bundle.vendor_torch_version}, HIP {bundle.hip_version}) loaded from "
        f"{bundle.root} onto torch {version}",
        bundle,
        tuple(paths),
    )


def _decide() -> PreloadState:
    if os.environ.get(ENV_PRELOAD, "1") == "0":
        return PreloadState("disabled", f"{ENV_PRELOAD}=0 is set: the DTK bundle is not loaded")
    bundle = read_bundle()
    if bundle is None:
        return PreloadState("absent", f"no DTK bundle at {bundle_dir()}")
    try:
        _dir, version, hip = installed_torch()
    except OSError as exc:
        raise DcuBundleError(f"torch-fl-dcu: cannot read torch's version.py: {exc}") from None
    if hip is not None:
        # DTK's own hipified torch: its kernels are its own; loading a second copy would clash.
        return PreloadState(
            "native", f"torch {version} is DTK's hipified build (HIP {hip}); bundle not used"
        )
    return _load(bundle)


def preload() -> PreloadState:
    """Load the bundle if this process needs it; idempotent. Raises :class:`DcuBundleError`
    (the same one again on a later call) when it cannot."""
    global _state
    if _state is None:
        try:
            _state = _decide()
        except DcuBundleError as exc:
            _state = PreloadState("failed", str(exc), error=exc)
        except Exception as exc:  # noqa: BLE001 - runs at interpreter start-up: always a reason
            error = DcuBundleError(
                f"torch-fl-dcu: loading the DTK bundle at {bundle_dir()} failed: "
                f"{type(exc).__name__}: {exc}. Check it (FLAGOS_DCU_PRELOAD=0 python -m "
                f"torch_fl_dcu.tools.stage --verify), re-stage it, or set {ENV_PRELOAD}=0 to run "
                f"without it"
            )
            error.__cause__ = exc
            _state = PreloadState("failed", str(error), error=error)
    if _state.error is not None:
        raise _state.error
    return _state
