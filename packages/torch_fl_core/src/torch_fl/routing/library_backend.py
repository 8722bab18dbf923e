"""Backends whose kernels are C++ operators a vendor registered in its own namespace.

A vendor package with native kernels (``torch-fl-gcu``'s generated topsaten kernels) registers
them with the dispatcher under its own operator namespace, one operator per aten overload it
serves, with aten's name and schema and a ``PrivateUse1`` kernel::

    TORCH_LIBRARY(torch_fl_gcu, m) { m.def("abs(Tensor self) -> Tensor"); ... }
    TORCH_LIBRARY_IMPL(torch_fl_gcu, PrivateUse1, m) { m.impl("abs", TORCH_FN(gcu_abs)); ... }

and then, in ``Vendor.activate()`` (after loading its library with ``torch.ops.load_library``)::

    torch_fl.routing.register_library_backend("gcu", namespace="torch_fl_gcu")

The backend has a kernel for ``aten::<op>.<overload>`` exactly when ``<namespace>::<op>.<overload>``
exists with a ``PrivateUse1`` kernel and aten's argument types; the router calls it below autograd.
It is a native producer: on a runtime declaring ``CAP_UNORDERED_PRODUCERS`` core drains Triton
work queued on the stream before it runs (docs/routing.md, "Producers on one stream").
"""

from __future__ import annotations

__all__ = ["library_backends", "register_library_backend"]

# name -> namespace, so that routing can say "the SDK has no kernel" rather than a generic reason.
_registered: dict[str, str] = {}


def library_backends() -> dict[str, str]:
    """The library backends registered in this process: name -> operator namespace."""
    return dict(_registered)


def register_library_backend(name: str, namespace: str) -> None:
    """Register backend ``name`` serving aten overloads from operator namespace ``namespace``.

    Registering a name again replaces that backend for routes installed afterwards.
    """
    from torch_fl import _C

    if not namespace or namespace == "aten" or "::" in namespace:
        raise ValueError(
            f"register_library_backend({name!r}): namespace must be the vendor's own operator "
            f"namespace, got {namespace!r}"
        )
    _C.register_library_backend(name, namespace)
    _registered[name] = namespace
