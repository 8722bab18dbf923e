"""The native vendor: a runtime library over the vendor's SDK, a kernels library over its kernel
library, both built into the vendor's package (``torch_fl_gcu``, ``torch_fl_ascend``).

A native vendor package lays out its Python package as this base expects and declares only what
is its own as class attributes::

    <package>/__init__.py   library_dir(), kernels_manifest(), sdk_info()  (imports no torch)
    <package>/sdk.py        SPEC (torch_fl.vendors.sdk.SdkSpec's fields), forwarded to core's loader
    <package>/_torch_build.py                 written by the build: the torch the kernels are for
    <package>/lib/lib<package>_runtime.so     torch_fl/runtime.h over the SDK's runtime
    <package>/lib/lib<package>_kernels.so     the generated kernels, namespace <package>
    <package>/lib/sdk.json, kernels.json      the build's records
    <package>/routes/<name>.conf              the route table

:class:`NativeVendor` does the rest: the torch-build check when the vendor is made, the SDK load
before the runtime library, the presence check through the runtime's probe, the emulator report,
the kernels' registration as the ``<name>`` backend, the ``flaggems`` backend where the vendor's
Triton runs, and what ``python -m <package>`` prints (:meth:`NativeVendor.build_report`).
"""

from __future__ import annotations

import ctypes
import importlib
import types
from pathlib import Path

from torch_fl import versions
from torch_fl.vendors import Vendor
from torch_fl.vendors.sdk import SdkNotFoundError, probe_runtime

__all__ = ["NativeVendor", "report_main"]


class NativeVendor(Vendor):
    """A vendor whose runtime and kernels are libraries of its package, over an SDK installed
    outside the wheel. Subclasses set the class attributes below (and :attr:`Vendor.name`)."""

    #: The vendor's Python package (``"torch_fl_gcu"``); also its kernels' operator namespace.
    package: str = ""
    #: What one device is called in the no-device message (``"GCU device"``).
    device_noun: str = ""
    #: The probe's detail when the runtime reports no device and says nothing more
    #: (``"topsGetDeviceCount reported 0 GCU devices"``).
    no_device_detail: str = ""
    #: What to check when there is no device (``"driver loaded? /dev/gcu* present?"``).
    no_device_hint: str = ""
    #: The SDK emulator's name (``"TopsRider emulator"``), the devices it emulates (``"GCU
    #: cards"``) and what a build for the hardware uses instead (``"an SDK for Enflame hardware"``),
    #: for :attr:`emulated`.
    emulator_name: str = ""
    emulated_devices: str = ""
    hardware_sdk: str = ""
    #: The kernel library, as ``python -m <package>`` names it and its functions
    #: (``("topsaten", "topsaten")``: "topsaten kernels ... topsaten functions").
    kernel_names: tuple[str, str] = ("", "")
    #: FlagGems: ``GEMS_VENDOR`` for this vendor, the names its Triton backend registers under,
    #: and how the reason names them when none is installed (``"'enflame'"``, ``"Ascend"``).
    gems_vendor: str = ""
    triton_backends: tuple[str, ...] = ()
    triton_label: str = ""
    #: The SDK's collective library that ``lib<package>_collective.so`` (csrc/collective, the
    #: ``vendor`` tier of torch.distributed) runs on, as ``(name, file)``: ``("hccl",
    #: "libhccl.so")``; None: the vendor has none.
    collective_sdk: tuple[str, str] | None = None

    def __init__(self) -> None:
        self._absent = "not checked yet"
        try:  # written by the build: the torch the kernels are for
            build = importlib.import_module(f"{self.package}._torch_build")
        except ImportError:  # a source tree that was never built
            build = None
        # The kernels library links against one torch minor: under another, one clear error.
        versions.check_torch_build(self.distribution, build)

    # ---- the package ---------------------------------------------------------------------------

    @property
    def distribution(self) -> str:
        """The wheel's name, for messages: ``torch-fl-gcu``."""
        return self.package.replace("_", "-")

    @property
    def module(self) -> types.ModuleType:
        """The vendor's package (``library_dir``, ``kernels_manifest``, ``sdk_info``)."""
        return importlib.import_module(self.package)

    @property
    def sdk(self) -> types.ModuleType:
        """The vendor's SDK module (``load``, ``loaded``, ``search_dirs``, :data:`SdkNotFoundError`)."""
        return importlib.import_module(f"{self.package}.sdk")

    def library(self, role: str) -> Path:
        """``lib<package>_<role>.so`` of the installed package (``role``: runtime, kernels,
        collective)."""
        return self.module.library_dir() / f"lib{self.package}_{role}.so"

    def _collective_sdk_file(self) -> Path | None:
        """Where the SDK's collective library is: the directory the SDK was loaded from, else
        where the SDK is looked for."""
        assert self.collective_sdk is not None
        found = self.sdk.loaded()
        dirs = [Path(found.lib_dir)] if found else [Path(d) for d in self.sdk.search_dirs()]
        return next(
            (d / self.collective_sdk[1] for d in dirs if (d / self.collective_sdk[1]).is_file()),
            None,
        )

    # ---- Vendor --------------------------------------------------------------------------------

    def runtime_library(self) -> str:
        # Core loads this next: its SDK dependencies must already be loaded (no SDK path is in its
        # rpath). is_present() has loaded the SDK; this keeps the order regardless.
        self.sdk.load()
        return str(self.library("runtime"))

    def is_present(self) -> bool:
        path = self.library("runtime")
        if not path.is_file():
            self._absent = (
                f"the runtime library {path} is missing ({self.distribution} was not built?)"
            )
            return False
        try:
            self.sdk.load()
        except SdkNotFoundError as exc:
            self._absent = str(exc)
            return False
        try:
            count, detail = probe_runtime(path, f"tfl_{self.name}_probe")
        except OSError as exc:
            self._absent = f"the runtime library {path} does not load: {exc}"
            return False
        if count <= 0:
            detail = detail or self.no_device_detail
            self._absent = f"no {self.device_noun}: {detail} ({self.no_device_hint})"
            return False
        return True

    def why_absent(self) -> str:
        return self._absent

    def collective_library(self) -> tuple[str, str | None] | None:
        if self.collective_sdk is None:
            return None
        name, file = self.collective_sdk
        if self._collective_sdk_file() is None:
            found = self.sdk.loaded()
            where = found.lib_dir if found else ", ".join(str(d) for d in self.sdk.search_dirs())
            return name, f"{file} is not in the {self.sdk.SPEC['product']} ({where})"
        ours = self.library("collective")
        if not ours.is_file():
            return name, f"this {self.distribution} has no {ours.name}"
        return name, None

    def collective_library_path(self) -> str | None:
        answer = self.collective_library()
        if answer is None or answer[1] is not None:
            return None
        # The collective library finds the SDK's by its soname (DT_NEEDED, or dlopen at first
        # use): loaded here first, from where the SDK is, as the runtime's SDK libraries are.
        ctypes.CDLL(str(self._collective_sdk_file()), mode=ctypes.RTLD_GLOBAL)
        return str(self.library("collective"))

    def activate(self) -> None:
        # The vendor's own hook, as in any vendor package: routing is imported here and in the
        # flaggems methods, at activation, never when torch_fl.vendors is imported.
        import torch

        from torch_fl.routing import register_library_backend

        # Idempotent: the loader keeps one copy of the library, registrations run once. Its
        # dependency on the SDK's kernel library is satisfied by sdk.load().
        self.sdk.load()
        torch.ops.load_library(str(self.library("kernels")))
        register_library_backend(self.name, self.package)
        self.register_flaggems()

    def route_table(self) -> Path:
        # Generated by `python -m <package>.routing.generate`; checked in.
        return Path(self.module.__file__).resolve().parent / "routes" / f"{self.name}.conf"

    @property
    def emulated(self) -> str | None:  # type: ignore[override]
        """The SDK emulator when this build's SDK is the emulator (``lib/sdk.json``, written at
        build time), else None."""
        if not self.built_on_emulator():
            return None
        found = self.sdk.loaded()
        key = self.sdk.SPEC["built_home_key"]
        home = str(Path(found.lib_dir).parent) if found else self.module.sdk_info().get(key, "?")
        return (
            f"{self.emulator_name} at {home} ({self.emulated_devices} emulated in host memory; "
            f"{self.distribution} was built against it, not against {self.hardware_sdk})"
        )

    # ---- the emulator and FlagGems -------------------------------------------------------------

    def built_on_emulator(self) -> bool:
        """Whether the package was built against the SDK's emulator (``lib/sdk.json``)."""
        return self.module.sdk_info().get("emulator", "FALSE").upper() in {"TRUE", "ON", "1"}

    def flaggems_available(self) -> tuple[bool, str]:
        """(available, why): a Triton with this vendor's backend, and FlagGems, importable."""
        from torch_fl.routing.flaggems import triton_backend

        return triton_backend(self.triton_backends, self.triton_label)

    def register_flaggems(self) -> bool:
        """Register the ``flaggems`` Python backend (:mod:`torch_fl.routing.flaggems`) when it can
        run here: kernels taken from FlagGems' kernel table (never ``flag_gems.enable()``, which
        would register a competing PrivateUse1 implementation), launched on the flagos current
        stream as it is (no alias views). False otherwise (``flaggems.status()`` says why)."""
        from torch_fl.routing import flaggems

        return flaggems.register(
            vendor=self.name,
            gems_vendor=self.gems_vendor,
            view_device=None,
            available=self.flaggems_available(),
        )

    # ---- python -m <package> -------------------------------------------------------------------

    def build_report(self) -> list[str]:
        """What this build of the package has: SDK at build time and now, kernels, skipped ops,
        FlagGems (``python -m <package>`` prints it)."""
        info = self.module.sdk_info()
        manifest = self.module.kernels_manifest()
        product = self.sdk.SPEC["product"]
        home = info.get(self.sdk.SPEC["built_home_key"], "?")
        lines = [
            f"{self.distribution} libraries: {self.module.library_dir()}",
            f"{product} at build time: {home} (emulator: {info.get('emulator', '?')})",
        ]
        try:
            found = self.sdk.load()
            lines.append(
                f"{product} loaded: {', '.join(found.paths.values())} (from {found.source})"
            )
        except SdkNotFoundError as exc:
            lines.append(f"{product}: not loaded: {exc}")
        gen = manifest.get("generated", {})
        functions = {fn for v in gen.values() for fn in v.split("+")}  # handwritten: "a+b+..."
        kernels, calls = self.kernel_names
        lines.append(
            f"{kernels} kernels: {len(gen)} aten overloads using {len(functions)} {calls} functions"
        )
        lines += [f"  skipped: {w}" for w in manifest.get("warnings", [])]
        ok, why = self.flaggems_available()
        lines.append(f"FlagGems backend: {'active' if ok else 'inactive'} ({why})")
        return lines


def report_main(package: str) -> int:
    """``python -m <package>`` of a native vendor package: prints :meth:`NativeVendor.build_report`.

    The vendor object is imported after torch-fl, whose vendor discovery imports the package's
    ``vendor`` module (it must not be half imported)."""
    import torch_fl  # noqa: F401

    vendor = importlib.import_module(f"{package}.vendor").vendor
    print(*vendor.build_report(), sep="\n")
    return 0
