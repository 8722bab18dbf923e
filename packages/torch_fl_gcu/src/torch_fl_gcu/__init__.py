"""torch-fl-gcu: Enflame GCU under the ``flagos`` device.

``pip install torch-fl-core torch-fl-gcu`` and ``import torch`` give ``flagos`` devices backed by
GCUs: core finds this package through the ``torch_fl.vendors`` entry point (``gcu``), the vendor
loads the TopsRider SDK from where it is installed (:mod:`torch_fl_gcu.sdk`: ``$TOPS_HOME/lib``,
else ``/opt/tops/lib``, else the loader path), core loads the topsrt runtime
(``lib/libtorch_fl_gcu_runtime.so``, torch_fl/runtime.h over ``libtopsrt.so``),
and :meth:`GcuVendor.activate` loads the generated topsaten kernels (``lib/libtorch_fl_gcu_kernels.so``)
and registers them as the ``gcu`` backend of the route table ``routes/gcu.conf``.
See README.md and docs/gcu.md.

This module imports neither torch nor torch_fl (core imports it while it sets up the device);
the vendor itself is :mod:`torch_fl_gcu.vendor`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

__all__ = ["NAMESPACE", "kernels_manifest", "library_dir", "sdk_info"]

#: The operator namespace of the generated kernels (core's library backend reads it).
NAMESPACE = "torch_fl_gcu"
_HERE = Path(__file__).resolve().parent


def library_dir() -> Path:
    """``torch_fl_gcu/lib`` of the installed package (editable installs: the build's copy)."""
    import importlib.util

    spec = importlib.util.find_spec(__name__)
    for location in (spec.submodule_search_locations or []) if spec else []:
        lib = Path(location) / "lib"
        if (lib / "libtorch_fl_gcu_runtime.so").is_file():
            return lib
    return _HERE / "lib"


@functools.cache
def kernels_manifest() -> dict:
    """What the kernel generator produced at build time (``lib/kernels.json``): ``generated``
    {aten overload: topsaten function}, ``skipped`` {aten overload: why}, ``warnings``."""
    path = library_dir() / "kernels.json"
    if not path.is_file():
        return {"generated": {}, "skipped": {}, "warnings": [f"{path} is missing"]}
    return json.loads(path.read_text())


def sdk_info() -> dict:
    """Where the SDK was at build time: ``tops_home``, ``emulator`` ("TRUE"/"FALSE"). Information
    only: the SDK used is found at run time (:func:`torch_fl_gcu.sdk.load`)."""
    path = library_dir() / "sdk.json"
    return json.loads(path.read_text()) if path.is_file() else {}
