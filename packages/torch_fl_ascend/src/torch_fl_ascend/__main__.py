"""``python -m torch_fl_ascend``: what this build of torch-fl-ascend has (toolkit, kernels), printed by
core's :meth:`torch_fl.vendors.native.NativeVendor.build_report`."""

import sys

from torch_fl.vendors.native import report_main

if __name__ == "__main__":
    sys.exit(report_main("torch_fl_ascend"))
