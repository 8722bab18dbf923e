"""Finding and loading the TopsRider SDK at run time.

The SDK lives outside the wheel, wherever the user installed it, so the package's libraries carry
no path to it (their rpath is ``$ORIGIN``-relative only). Before core loads the runtime library,
:func:`load` loads the SDK's ``libtopsrt.so`` and ``libtopsaten.so`` (``RTLD_GLOBAL``); the
dynamic loader then satisfies the runtime's and kernels' ``DT_NEEDED`` entries with them. Each
library is looked for in, in order:

1. ``$TOPS_HOME/lib`` and ``$TOPS_HOME/lib64`` when ``TOPS_HOME`` is set, else the TopsRider default
   install location ``/opt/tops/lib`` and ``/opt/tops/lib64``;
2. the dynamic loader path (``LD_LIBRARY_PATH``, the ``ldconfig`` cache, the system directories).

When one is not found, :class:`SdkNotFoundError` says which library, where it was looked for and
how to fix it (set ``TOPS_HOME``). This module imports neither torch nor torch_fl.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "ATEN_LIBRARY",
    "DEFAULT_HOME",
    "ENV_VAR",
    "RUNTIME_LIBRARY",
    "Sdk",
    "SdkNotFoundError",
    "load",
    "loaded",
    "search_dirs",
]

#: The environment variable naming the TopsRider install.
ENV_VAR = "TOPS_HOME"
#: Where TopsRider installs by default, looked in when TOPS_HOME is unset.
DEFAULT_HOME = "/opt/tops"
#: The SDK's libraries, in load order (topsaten needs topsrt).
RUNTIME_LIBRARY = "libtopsrt.so"
ATEN_LIBRARY = "libtopsaten.so"
LOADER_PATH = "the dynamic loader path"

_MISSING_DEPENDENCY = re.compile(r"(\S+\.so(?:\.[0-9]+)*): cannot open shared object file")


class SdkNotFoundError(RuntimeError):
    """The TopsRider SDK cannot be loaded: a library is missing (or fails to load). The message
    names the library, the places looked in, and the fix."""


@dataclasses.dataclass(frozen=True)
class Sdk:
    """The TopsRider SDK this process loaded."""

    #: ``libtopsrt.so`` as loaded (the path the loader reports).
    runtime: str
    #: ``libtopsaten.so`` as loaded.
    aten: str
    #: Where it came from, as a phrase: ``TOPS_HOME=/opt/tops``, ``/opt/tops (TopsRider's default
    #: install location)``, ``the dynamic loader path``.
    source: str

    @property
    def lib_dir(self) -> str:
        return str(Path(self.runtime).parent)


def _home(environ: Mapping[str, str]) -> tuple[str, bool]:
    """(the TopsRider home to look in, whether TOPS_HOME named it)."""
    home = environ.get(ENV_VAR, "").strip()
    return (home, True) if home else (DEFAULT_HOME, False)


def search_dirs(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The directories looked in before the loader path: ``<home>/lib``, ``<home>/lib64``."""
    home, _ = _home(os.environ if environ is None else environ)
    return [Path(home) / "lib", Path(home) / "lib64"]


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
        lm = ctypes.POINTER(_LinkMap)()
        if dlinfo(lib._handle, 2, ctypes.byref(lm)) == 0 and lm and lm.contents.l_name:
            return lm.contents.l_name.decode(errors="replace")
    return fallback


def _dlopen(path: Path) -> ctypes.CDLL:
    """Load ``path`` globally; a sibling it needs that the loader cannot find (an SDK whose
    directory is not on the loader path) is loaded from the same directory first."""
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
            _dlopen(sibling)


def _loader_path_note(environ: Mapping[str, str]) -> str:
    ld = environ.get("LD_LIBRARY_PATH", "")
    return f"LD_LIBRARY_PATH={ld}" if ld else "LD_LIBRARY_PATH unset"


def _not_found(name: str, environ: Mapping[str, str], built: str) -> str:
    home, explicit = _home(environ)
    dirs = " and ".join(str(d) for d in search_dirs(environ))
    where = (
        f"TOPS_HOME={home}"
        if explicit
        else f"TOPS_HOME is unset, so TopsRider's default install location {home}"
    )
    hint = f". This torch-fl-gcu was built against {built}" if built else ""
    return (
        f"the TopsRider SDK library {name} was not found: looked in {dirs} ({where}) and on "
        f"the dynamic loader path ({_loader_path_note(environ)}, the ldconfig cache). "
        f"Set TOPS_HOME to the TopsRider install, the directory whose lib/ holds {name}: "
        f"export TOPS_HOME=/path/to/tops{hint}"
    )


def _find(name: str, environ: Mapping[str, str], built: str) -> tuple[str, str]:
    """Load one SDK library; (its path, where it came from)."""
    home, explicit = _home(environ)
    source = f"TOPS_HOME={home}" if explicit else f"{home} (TopsRider's default install location)"
    for directory in search_dirs(environ):
        candidate = directory / name
        if candidate.is_file():
            try:
                lib = _dlopen(candidate)
            except OSError as exc:
                raise SdkNotFoundError(
                    f"the TopsRider SDK library {candidate} ({source}) is there but does not "
                    f"load: {exc}. Set TOPS_HOME to a complete TopsRider install for this machine"
                ) from None
            return _loaded_path(lib, str(candidate)), source
    try:
        lib = ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        raise SdkNotFoundError(_not_found(name, environ, built)) from None
    return _loaded_path(lib, name), LOADER_PATH


_loaded: Sdk | None = None


def load(environ: Mapping[str, str] | None = None) -> Sdk:
    """Load the SDK (once per process; a failure is retried on the next call). Raises
    :class:`SdkNotFoundError` with the message users see when it is missing."""
    global _loaded
    if _loaded is not None:
        return _loaded
    env = os.environ if environ is None else environ
    from torch_fl_gcu import sdk_info

    info = sdk_info()
    built = ""
    if info.get("tops_home"):
        kind = "the TopsRider emulator" if info.get("emulator", "").upper() == "TRUE" else "an SDK"
        built = f"{kind} at {info['tops_home']}"
    runtime, source = _find(RUNTIME_LIBRARY, env, built)
    aten, aten_source = _find(ATEN_LIBRARY, env, built)
    if aten_source != source:
        source = f"{source}; {ATEN_LIBRARY} from {aten_source}"
    _loaded = Sdk(runtime=runtime, aten=aten, source=source)
    return _loaded


def loaded() -> Sdk | None:
    """The SDK :func:`load` loaded in this process, or None."""
    return _loaded
