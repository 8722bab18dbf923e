"""torch-fl-ascend: Huawei Ascend NPUs under the ``flagos`` device.

``pip install torch-fl-core torch-fl-ascend`` and ``import torch`` give ``flagos`` devices backed by
Ascend NPUs: core finds this package through the ``torch_fl.vendors`` entry point (``ascend``), the
vendor loads the CANN toolkit from where it is installed (:mod:`torch_fl_ascend.sdk`:
``$ASCEND_TOOLKIT_HOME``, else ``$ASCEND_HOME``, else ``/usr/local/Ascend/ascend-toolkit/latest``,
else the loader path), core loads the aclrt runtime (``lib/libtorch_fl_ascend_runtime.so``,
torch_fl/runtime.h over ``libascendcl.so``), and :meth:`AscendVendor.activate` loads the generated
ACLNN kernels (``lib/libtorch_fl_ascend_kernels.so``) and registers them as the ``ascend`` backend
of the route table ``routes/ascend.conf``. See README.md and docs/ascend.md.

This module imports neither torch nor torch_fl (test set-up reads it before torch is imported);
the vendor itself is :mod:`torch_fl_ascend.vendor`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

__all__ = ["NAMESPACE", "kernels_manifest", "library_dir", "sdk_info"]

#: The operator namespace of the generated kernels (core's library backend reads it).
NAMESPACE = "torch_fl_ascend"
_HERE = Path(__file__).resolve().parent


def library_dir() -> Path:
    """``torch_fl_ascend/lib`` of the installed package (editable installs: the build's copy)."""
    import importlib.util

    spec = importlib.util.find_spec(__name__)
    for location in (spec.submodule_search_locations or []) if spec else []:
        lib = Path(location) / "lib"
        if (lib / "libtorch_fl_ascend_runtime.so").is_file():
            return lib
    return _HERE / "lib"


@functools.cache
def kernels_manifest() -> dict:
    """What the kernel generator produced at build time (``lib/kernels.json``): ``generated``
    {aten overload: aclnn function}, ``skipped`` {aten overload: why}, ``warnings``."""
    path = library_dir() / "kernels.json"
    if not path.is_file():
        return {"generated": {}, "skipped": {}, "warnings": [f"{path} is missing"]}
    return json.loads(path.read_text())


def sdk_info() -> dict:
    """Where the toolkit was at build time: ``cann_home``, ``emulator`` ("TRUE"/"FALSE").
    Information only: the toolkit used is found at run time (:func:`torch_fl_ascend.sdk.load`)."""
    path = library_dir() / "sdk.json"
    return json.loads(path.read_text()) if path.is_file() else {}
