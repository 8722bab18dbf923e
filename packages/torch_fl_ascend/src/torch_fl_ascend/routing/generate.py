"""Generator of the Ascend route table, ``torch_fl_ascend/routes/ascend.conf``.

::

    python -m torch_fl_ascend.routing.generate              # rewrite the table
    python -m torch_fl_ascend.routing.generate --check      # exit 1 if it is not up to date
    python -m torch_fl_ascend.routing.generate --output -   # print it

FlagGems first, native ACLNN kernels next, the CPU last; independent of what is importable where
it runs:

- the FlagGems overloads are core's ``torch_fl/routing/flaggems_ops.txt`` (a snapshot of FlagGems' ``_FULL_CONFIG``
  names, vendor neutral) plus every overload of ``routing/gaps.json``;
- ``ascend`` is available for the overloads this build generated ACLNN kernels for
  (``lib/kernels.json``: the ops table checked against ``nm -D libopapi.so``); an op the toolkit
  lacks has no ``ascend`` route, and the generator warns about it;
- a FlagGems overload gets ``flaggems, ascend, cpu`` (``flaggems, cpu`` without an ACLNN kernel).
  The ``flaggems`` backend is registered only where a Triton with an Ascend backend and FlagGems
  are importable (:func:`torch_fl_ascend.flaggems.ascend_triton`); elsewhere the list resolves to
  the native kernel at load;
- the dtypes an op's ACLNN kernel does not compute in (``kernels.json``'s ``dtypes``, from the ops
  table) get a rule of their own without ``ascend``: ``op[float64, ...] = flaggems, cpu`` (or
  ``= cpu``), so those calls never reach a kernel that would decline them;
- the gap set (``routing/gaps.json``, FlagGems failures measured on an Ascend NPU) takes overloads
  off ``flaggems``, whole (``"all"``) or for the dtypes it lists; it is empty until such a
  measurement exists, and its ``measured`` becomes the ``# flaggems-measured:`` pragma;
- ``cpu`` is otherwise not written: an overload without a line keeps PyTorch's default on flagos
  (its composite kernel, else core's CPU fallback) -- except the composites whose kernel calls a
  DispatchStub for the tensor's device (core's ``STUB_COMPOSITES``), routed to ``cpu`` whole.

The output is sorted and byte-identical on every run with the same build and torch minor.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch_fl.routing.flaggems_first import ServedTable, served_table_main

__all__ = ["ASCEND", "main"]

ASCEND = ServedTable(
    backend="ascend",
    title="Route table of the Huawei Ascend vendor (torch-fl-ascend).",
    command="python -m torch_fl_ascend.routing.generate",
    kernels="ACLNN",
    ops_table="tools/aclnn_ops.py",
    skipped_heading="Without an ascend route (missing from libopapi.so)",
    flaggems_note=(
        "# flaggems is registered only where a Triton with an Ascend backend and FlagGems are",
        "# importable; elsewhere these lists resolve to the ACLNN kernels.",
    ),
)


def main(argv: Iterable[str] | None = None) -> int:
    return served_table_main(ASCEND, "torch_fl_ascend", argv)


if __name__ == "__main__":
    import sys

    sys.exit(main())
