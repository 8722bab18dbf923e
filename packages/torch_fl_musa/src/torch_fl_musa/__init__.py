"""torch-fl-musa: Moore Threads MUSA GPUs under the ``flagos`` device.

``pip install torch-fl-core torch-fl-musa`` and ``import torch`` give ``flagos`` devices backed by
MUSA GPUs: core finds this package through the ``torch_fl.vendors`` entry point (``musa``), the
vendor loads the MUSA SDK from where it is installed (:mod:`torch_fl_musa.sdk`: ``$MUSA_HOME/lib``,
else ``/usr/local/musa/lib``, else the loader path), core loads the MUSA runtime table
(``lib/libtorch_fl_musa_runtime.so``, torch_fl/runtime.h over ``libmusart.so``), and
:meth:`MusaVendor.activate` loads the generated muDNN kernels (``lib/libtorch_fl_musa_kernels.so``)
and registers them as the ``musa`` backend of the route table ``routes/musa.conf``.
See README.md and docs/musa.md.

This module imports neither torch nor torch_fl (core imports it while it sets up the device);
the vendor itself is :mod:`torch_fl_musa.vendor`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

__all__ = ["NAMESPACE", "kernels_manifest", "library_dir", "sdk_info"]

#: The operator namespace of the generated kernels (core's library backend reads it).
NAMESPACE = "torch_fl_musa"
_HERE = Path(__file__).resolve().parent


def library_dir() -> Path:
    """``torch_fl_musa/lib`` of the installed package (editable installs: the build's copy)."""
    import importlib.util

    spec = importlib.util.find_spec(__name__)
    for location in (spec.submodule_search_locations or []) if spec else []:
        lib = Path(location) / "lib"
        if (lib / "libtorch_fl_musa_runtime.so").is_file():
            return lib
    return _HERE / "lib"


@functools.cache
def kernels_manifest() -> dict:
    """What the kernel generator produced at build time (``lib/kernels.json``): ``generated``
    {aten overload: muDNN operator and mode}, ``skipped`` {aten overload: why}, ``warnings``."""
    path = library_dir() / "kernels.json"
    if not path.is_file():
        return {"generated": {}, "skipped": {}, "warnings": [f"{path} is missing"]}
    return json.loads(path.read_text())


def sdk_info() -> dict:
    """Where the SDK was at build time: ``musa_home``, ``emulator`` ("TRUE"/"FALSE"). Information
    only: the SDK used is found at run time (:func:`torch_fl_musa.sdk.load`)."""
    path = library_dir() / "sdk.json"
    return json.loads(path.read_text()) if path.is_file() else {}
