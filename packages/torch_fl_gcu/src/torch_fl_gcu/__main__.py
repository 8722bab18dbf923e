"""``python -m torch_fl_gcu``: what this build of torch-fl-gcu has (SDK, kernels, skipped ops).

Printed by core's :meth:`torch_fl.vendors.native.NativeVendor.build_report`.
"""

from __future__ import annotations

import sys

# torch-fl first: its vendor discovery imports torch_fl_gcu.vendor, which must not be half imported.
import torch_fl  # noqa: F401


def main() -> int:
    from torch_fl_gcu.vendor import vendor

    print(*vendor.build_report(), sep="\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
