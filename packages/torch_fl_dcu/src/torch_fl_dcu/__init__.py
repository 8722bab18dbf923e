"""torch-fl's Hygon DCU vendor (``FLAGOS_VENDOR=dcu``).

Two platforms, one vendor (README.md):

- DTK's own hipified torch (``torch.version.hip`` set, HIP kernels under the CUDA dispatch key):
  nothing to load; the vendor activates core's delegate runtime and ``box:cuda`` directly.
- The official torch with the DTK device libraries this wheel bundles: importing this package loads
  the bundle RTLD_GLOBAL, which must happen before ``import torch``. The ``torch_fl_dcu.pth``
  start-up hook does it in every interpreter of the environment (``FLAGOS_DCU_PRELOAD=0`` turns the
  hook off; then ``import torch_fl_dcu`` first, explicitly).

Importing this package never imports torch: it is what runs before it.
"""

from __future__ import annotations

from torch_fl_dcu._preload import DcuBundleError, PreloadState, preload, state

__all__ = ["DcuBundleError", "PreloadState", "preload", "state"]

# Raises DcuBundleError (an ImportError) with the fix when the bundle cannot load.
preload()
