"""The runtime ABI's table (``include/torch_fl/runtime.h``) seen from Python, through ctypes.

For what must reach a runtime library before core loads it (a vendor's ``is_present()`` probing
for devices), without torch. :data:`FUNCTIONS` mirrors the header's ``TFL_RUNTIME_V1_FUNCTIONS``
list in table order (a test checks it against the header), so a field's offset is known and a
table whose ``struct_size`` ends before it (an older runtime) is never read past.
"""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

__all__ = ["ABI_VERSION", "FUNCTIONS", "Table", "table_function"]

ABI_VERSION = 1
ENTRY_SYMBOL = "tfl_runtime_get"

#: (field, the v1.x minor that added it), in table order.
FUNCTIONS: tuple[tuple[str, int], ...] = (
    ("init", 0),
    ("status_name", 0),
    ("last_error", 0),
    ("device_count", 0),
    ("get_device", 0),
    ("set_device", 0),
    ("device_synchronize", 0),
    ("mem_get_info", 0),
    ("device_name", 0),
    ("malloc", 0),
    ("free", 0),
    ("host_malloc", 0),
    ("host_free", 0),
    ("pointer_info", 0),
    ("memcpy", 0),
    ("memcpy_async", 0),
    ("memcpy_peer_async", 0),
    ("memset_async", 0),
    ("stream_create", 0),
    ("stream_destroy", 0),
    ("stream_synchronize", 0),
    ("stream_query", 0),
    ("stream_wait_event", 0),
    ("launch_host_func", 0),
    ("event_create", 0),
    ("event_destroy", 0),
    ("event_record", 0),
    ("event_synchronize", 0),
    ("event_query", 0),
    ("event_elapsed_ms", 0),
    ("ipc_get_handle", 1),
    ("ipc_open_handle", 1),
    ("ipc_close_handle", 1),
    ("native_stream", 2),
    ("probe", 2),
    ("graph_capture_begin", 3),
    ("graph_capture_end", 3),
    ("graph_instantiate", 3),
    ("graph_launch", 3),
    ("graph_destroy", 3),
    ("stream_capture_status", 3),
)


class Table(ctypes.Structure):
    """``tfl_runtime_v1``: the header fields, then one function pointer per :data:`FUNCTIONS`."""

    _fields_ = [
        ("abi_version", ctypes.c_uint32),
        ("struct_size", ctypes.c_uint32),
        ("name", ctypes.c_char_p),
        ("capabilities", ctypes.c_uint64),
    ] + [(name, ctypes.c_void_p) for name, _ in FUNCTIONS]


def table_function(
    library: str | Path | ctypes.CDLL, field: str, restype: Any, *argtypes: Any
) -> Any | None:
    """The table function ``field`` of runtime ``library`` as a ctypes function, or None when the
    library's table does not have it (its ``struct_size`` ends before the field, or it is NULL).
    Raises OSError when the library does not load or exports no table."""
    lib = library if isinstance(library, ctypes.CDLL) else ctypes.CDLL(str(library))
    get = getattr(lib, ENTRY_SYMBOL, None)
    if get is None:
        raise OSError(f"{library} is not a torch-fl runtime (no symbol {ENTRY_SYMBOL})")
    get.argtypes = [ctypes.c_uint32]
    get.restype = ctypes.c_void_p
    address = get(ABI_VERSION)
    if not address:
        raise OSError(f"{library} does not speak runtime ABI v{ABI_VERSION}")
    # Only the header is read before struct_size says how long the table is.
    header = ctypes.cast(address, ctypes.POINTER(ctypes.c_uint32 * 2)).contents
    struct_size = int(header[1])
    descriptor = getattr(Table, field)
    if struct_size < descriptor.offset + descriptor.size:
        return None
    pointer = ctypes.c_void_p.from_address(address + descriptor.offset).value
    if not pointer:
        return None
    return ctypes.CFUNCTYPE(restype, *argtypes)(pointer)
