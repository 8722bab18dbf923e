"""Finding and loading a vendor SDK's shared libraries at run time, for vendor packages.

A vendor wheel carries no path to its SDK (its libraries' rpaths are ``$ORIGIN``-relative), so the
SDK can live wherever the user installed it. Before core loads the vendor's runtime library, the
vendor loads the SDK's libraries ``RTLD_GLOBAL`` with an :class:`SdkLoader`; the dynamic loader then
satisfies the runtime's and kernels' ``DT_NEEDED`` entries with them. Each library is looked for in

1. ``<home>/<dir>`` for each of the spec's library directories, where ``<home>`` is the first of the
   spec's environment variables that is set, else the SDK's default install location;
2. the dynamic loader path (``LD_LIBRARY_PATH``, the ``ldconfig`` cache, the system directories).

When one is not found, :class:`SdkNotFoundError` names the library, where it was looked for, and
the variable to set. Nothing here touches torch or the device, so a vendor's ``is_present()`` can
use it before the device is set up.

A vendor package's ``sdk`` module holds only its :class:`SdkSpec` fields as a plain dict and
forwards ``load``/``loaded``/``search_dirs``/``SdkNotFoundError`` to :func:`module_attribute`,
so importing it imports neither torch nor torch_fl (test set-up reads it before torch).
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "LOADER_PATH",
    "LoadedSdk",
    "SdkLoader",
    "SdkNotFoundError",
    "SdkSpec",
    "loader",
    "module_attribute",
    "probe_runtime",
]

LOADER_PATH = "the dynamic loader path"

_MISSING_DEPENDENCY = re.compile(r"(\S+\.so(?:\.[0-9]+)*): cannot open shared object file")


class SdkNotFoundError(RuntimeError):
    """A vendor SDK library cannot be loaded: missing, or it fails to load. The message names the
    library, the places looked in, and the fix."""


@dataclasses.dataclass(frozen=True)
class SdkSpec:
    """Where one vendor's SDK lives and what to load from it."""

    #: How users call it: ``"TopsRider SDK"``, ``"CANN toolkit"``.
    product: str
    #: The variables naming its install, in priority order (``("ASCEND_TOOLKIT_HOME", ...)``).
    env_vars: tuple[str, ...]
    #: Its default install location, looked in when none of them is set.
    default_home: str
    #: The libraries to load, in dependency order (``("libascendcl.so", "libopapi.so")``).
    libraries: tuple[str, ...]
    #: Directories under the home that hold them.
    lib_dirs: tuple[str, ...] = ("lib", "lib64")
    #: The home in the fix the not-found message gives (``export VAR=<example>``).
    example: str = "/path/to/it"
    #: The key of the package's build record (``lib/sdk.json``) naming the SDK it was built
    #: against (``"tops_home"``); its ``emulator`` key says whether that was the emulator.
    built_home_key: str = "home"
    #: What the build record's SDK is called in the not-found hint: the emulator
    #: (``"the TopsRider emulator"``), or a real install (``"an SDK"``).
    emulator: str = "the emulator"
    real: str = "an SDK"


@dataclasses.dataclass(frozen=True)
class LoadedSdk:
    """The SDK a process loaded."""

    #: library name -> the file the loader mapped.
    paths: dict[str, str]
    #: Where it came from, as a phrase: ``ASCEND_TOOLKIT_HOME=/x``, ``/opt/tops (the TopsRider
    #: SDK's default install location)``, ``the dynamic loader path``.
    source: str

    @property
    def runtime(self) -> str:
        """The first library of the spec (its runtime, which the others need), as loaded."""
        return next(iter(self.paths.values()))

    @property
    def lib_dir(self) -> str:
        return str(Path(self.runtime).parent)


def _loaded_path(lib: ctypes.CDLL, fallback: str) -> str:
    """The file the loader mapped for ``lib`` (``dlinfo(RTLD_DI_LINKMAP)``), else ``fallback``."""

    class _LinkMap(ctypes.Structure):
        _fields_ = [("l_addr", ctypes.c_void_p), ("l_name", ctypes.c_char_p)]

    for libc_name in (None, "libdl.so.2"):
        try:
            dlinfo = ctypes.CDLL(libc_name).dlinfo
        except (OSError, AttributeError):
            continue
        dlinfo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        dlinfo.restype = ctypes.c_int
        link_map = ctypes.POINTER(_LinkMap)()
        if dlinfo(lib._handle, 2, ctypes.byref(link_map)) == 0 and link_map:
            name = link_map.contents.l_name
            if name:
                return name.decode(errors="replace")
    return fallback


def _dlopen_with_siblings(path: Path) -> ctypes.CDLL:
    """Load ``path`` globally; a library it needs that the loader cannot find (an SDK directory
    that is not on the loader path) is loaded from the same directory first."""
    tried: set[str] = set()
    while True:
        try:
            return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)
        except OSError as exc:
            match = _MISSING_DEPENDENCY.search(str(exc))
            sibling = path.parent / match.group(1) if match else None
            if sibling is None or sibling.name in tried or not sibling.is_file():
                raise
            tried.add(sibling.name)
            _dlopen_with_siblings(sibling)


class SdkLoader:
    """Loads one SDK once per process (a failure is retried on the next call)."""

    def __init__(
        self, spec: SdkSpec, build_info: Callable[[], Mapping[str, Any]] | None = None
    ) -> None:
        self.spec = spec
        #: The package's build record (``lib/sdk.json`` as a dict), for the not-found hint.
        self.build_info = build_info
        self._loaded: LoadedSdk | None = None

    def built(self) -> tuple[str, str]:
        """(what the package was built against, as a phrase, or ""; that SDK's home, or "")."""
        info = self.build_info() if self.build_info is not None else {}
        home = str(info.get(self.spec.built_home_key) or "")
        if not home:
            return "", ""
        emulated = str(info.get("emulator", "")).upper() == "TRUE"
        return f"{self.spec.emulator if emulated else self.spec.real} at {home}", home

    def home(self, environ: Mapping[str, str] | None = None) -> tuple[str, str | None]:
        """(the home to look in, the variable that named it, or None for the default)."""
        env = os.environ if environ is None else environ
        for var in self.spec.env_vars:
            value = env.get(var, "").strip()
            if value:
                return value, var
        return self.spec.default_home, None

    def search_dirs(self, environ: Mapping[str, str] | None = None) -> list[Path]:
        home, _ = self.home(environ)
        return [Path(home) / d for d in self.spec.lib_dirs]

    def _source(self, environ: Mapping[str, str]) -> str:
        home, var = self.home(environ)
        if var:
            return f"{var}={home}"
        return f"{home} (the {self.spec.product}'s default install location)"

    def _not_found(
        self, name: str, environ: Mapping[str, str], built: str, built_home: str = ""
    ) -> str:
        home, var = self.home(environ)
        dirs = " and ".join(str(d) for d in self.search_dirs(environ))
        unset = " and ".join(self.spec.env_vars)
        where = (
            f"{var}={home}"
            if var
            else f"{unset} {'is' if len(self.spec.env_vars) == 1 else 'are'} unset, so the "
            f"{self.spec.product}'s default install location {home}"
        )
        ld = environ.get("LD_LIBRARY_PATH", "")
        loader = f"LD_LIBRARY_PATH={ld}" if ld else "LD_LIBRARY_PATH unset"
        first = self.spec.env_vars[0]
        hint = f". This package was built against {built}" if built else ""
        if built_home and Path(built_home).is_dir():
            # The wheel's own build-time SDK (an emulator in CI) is on this machine: say how.
            hint += f"; to use it: export {first}={built_home}"
        return (
            f"the {self.spec.product} library {name} was not found: looked in {dirs} ({where}) "
            f"and on the dynamic loader path ({loader}, the ldconfig cache). Set {first} to the "
            f"{self.spec.product} install whose {' or '.join(d + '/' for d in self.spec.lib_dirs)} "
            f"holds {name}: "
            f"export {first}={self.spec.example}{hint}"
        )

    def _find(
        self, name: str, environ: Mapping[str, str], built: str, built_home: str = ""
    ) -> tuple[str, str]:
        source = self._source(environ)
        for directory in self.search_dirs(environ):
            candidate = directory / name
            if not candidate.is_file():
                continue
            try:
                lib = _dlopen_with_siblings(candidate)
            except OSError as exc:
                raise SdkNotFoundError(
                    f"the {self.spec.product} library {candidate} ({source}) is there but does "
                    f"not load: {exc}. Point {self.spec.env_vars[0]} at a complete "
                    f"{self.spec.product} install for this machine"
                ) from None
            return _loaded_path(lib, str(candidate)), source
        try:
            lib = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            raise SdkNotFoundError(self._not_found(name, environ, built, built_home)) from None
        return _loaded_path(lib, name), LOADER_PATH

    def load(
        self,
        environ: Mapping[str, str] | None = None,
        *,
        built: str | None = None,
        built_home: str | None = None,
    ) -> LoadedSdk:
        """Load every library of the spec; ``built`` ("the CANN emulator at /x") is added to the
        not-found message as a hint, with the export that selects ``built_home`` (that SDK's
        install) where it exists on this machine. Both default to the build record's."""
        if self._loaded is not None:
            return self._loaded
        env = os.environ if environ is None else environ
        if built is None or built_home is None:
            recorded, recorded_home = self.built()
            built = recorded if built is None else built
            built_home = recorded_home if built_home is None else built_home
        paths: dict[str, str] = {}
        sources: list[str] = []
        for name in self.spec.libraries:
            paths[name], source = self._find(name, env, built, built_home)
            if source not in sources:
                sources.append(source)
        self._loaded = LoadedSdk(paths=paths, source="; ".join(sources))
        return self._loaded

    def loaded(self) -> LoadedSdk | None:
        return self._loaded


_loaders: dict[str, SdkLoader] = {}
_loaders_lock = threading.Lock()


def loader(
    owner: str, spec: Mapping[str, Any], build_info: Callable[[], Mapping[str, Any]]
) -> SdkLoader:
    """The one :class:`SdkLoader` of the SDK module ``owner`` (``"torch_fl_gcu.sdk"``) in this
    process, made from ``spec`` (:class:`SdkSpec`'s fields) on first use."""
    with _loaders_lock:
        found = _loaders.get(owner)
        if found is None:
            found = _loaders[owner] = SdkLoader(SdkSpec(**spec), build_info)
        return found


#: What a vendor's SDK module forwards to its loader.
_FORWARDED = ("load", "loaded", "search_dirs", "home")


def module_attribute(
    owner: str, spec: Mapping[str, Any], build_info: Callable[[], Mapping[str, Any]], name: str
) -> Any:
    """A vendor SDK module's ``__getattr__``: ``load``, ``loaded``, ``search_dirs`` and ``home`` of
    its :func:`loader`, and :class:`SdkNotFoundError` (what ``load`` raises)."""
    if name == "SdkNotFoundError":
        return SdkNotFoundError
    if name in _FORWARDED:
        return getattr(loader(owner, spec, build_info), name)
    raise AttributeError(f"module {owner!r} has no attribute {name!r}")


def probe_runtime(library: str | Path, symbol: str | None = None) -> tuple[int, str]:
    """Count a vendor runtime library's devices before core loads it: (device count, the
    runtime's message; the count is 0 when the probe failed). Uses the table's ``probe`` (runtime
    ABI v1.2); a runtime built before it is probed through ``symbol``, the ``int symbol(int*
    count, char* msg, size_t len)`` (0 on success) it exported off the table. Raises OSError when
    the library does not load (its SDK is missing). Vendors' ``is_present()`` use it, with the SDK
    loaded first."""
    from torch_fl.runtimes import abi

    lib = ctypes.CDLL(str(library))
    argtypes = (ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_size_t)
    probe = abi.table_function(lib, "probe", ctypes.c_int, *argtypes)
    if probe is None and symbol is not None:
        probe = getattr(lib, symbol)
        probe.argtypes = list(argtypes)
        probe.restype = ctypes.c_int
    if probe is None:
        return 0, (
            f"{library} has no device probe: its table predates runtime ABI v1.2 and no "
            "off-table probe symbol was named"
        )
    count = ctypes.c_int(0)
    msg = ctypes.create_string_buffer(512)
    rc = probe(ctypes.byref(count), msg, len(msg))
    return (count.value if rc == 0 else 0), msg.value.decode(errors="replace")
