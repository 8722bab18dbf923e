"""Generator of the MUSA route table, ``torch_fl_musa/routes/musa.conf``.

::

    python -m torch_fl_musa.routing.generate              # rewrite the table
    python -m torch_fl_musa.routing.generate --check      # exit 1 if it is not up to date
    python -m torch_fl_musa.routing.generate --output -   # print it

FlagGems first, muDNN kernels next, the CPU last (core's
:func:`torch_fl.routing.flaggems_first.served_table`), independent of what is importable where it
runs:

- the FlagGems overloads are core's ``torch_fl/routing/flaggems_ops.txt``; the ``flaggems``
  backend is registered only where a Triton with a MUSA backend (``mthreads``) and FlagGems
  import, elsewhere the lists resolve to the muDNN kernels;
- ``musa`` is available for the overloads this build generated muDNN kernels for
  (``lib/kernels.json``: the ops table checked against ``nm -DC libmudnn.so``);
- the dtypes a mode's muDNN kernel does not compute in (the ops table's ``dtypes``) get a rule of
  their own without ``musa``, so those calls never reach a kernel that would decline them;
- no FlagGems gap set is measured on MUSA yet (no ``routing/gaps.json``): every FlagGems overload
  keeps ``flaggems`` first.

The output is sorted and byte-identical on every run with the same build and torch minor.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch_fl.routing.flaggems_first import ServedTable, served_table_main

__all__ = ["MUSA", "main"]

MUSA = ServedTable(
    backend="musa",
    title="Route table of the Moore Threads MUSA vendor (torch-fl-musa).",
    command="python -m torch_fl_musa.routing.generate",
    kernels="muDNN",
    ops_table="tools/mudnn_ops.py",
    skipped_heading="Without a musa route (missing from libmudnn.so)",
    flaggems_note=(
        "# flaggems is registered only where a Triton with a MUSA backend and FlagGems are",
        "# importable; elsewhere these lists resolve to the muDNN kernels.",
    ),
)


def main(argv: Iterable[str] | None = None) -> int:
    return served_table_main(MUSA, "torch_fl_musa", argv)


if __name__ == "__main__":
    import sys

    sys.exit(main())
