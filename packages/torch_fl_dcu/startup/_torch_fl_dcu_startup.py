"""Start-up hook of torch-fl-dcu, run by ``torch_fl_dcu.pth`` in every interpreter of the environment.

The DTK bundle must be loaded before ``import torch`` (see torch_fl_dcu._preload), and torch's own
autoload of torch_fl comes at the end of ``import torch``, too late. So the wheel installs this
``.pth`` hook. It costs a few stats when there is no bundle and imports nothing more then, and it
never raises: a failure is recorded and raised again by the ``import torch_fl_dcu`` that
``import torch`` does (through torch_fl's vendor discovery), where the user sees it with the fix.
"""

import os


def _run() -> None:
    if os.environ.get("FLAGOS_DCU_PRELOAD", "1") == "0":
        return
    bundle = os.environ.get("FLAGOS_DCU_BUNDLE")
    if not bundle:
        import importlib.util

        spec = importlib.util.find_spec("torch_fl_dcu")
        if spec is None or not spec.submodule_search_locations:
            return
        bundle = os.path.join(next(iter(spec.submodule_search_locations)), "_bundle")
    if not os.path.exists(os.path.join(bundle, "bundle.json")):
        return
    try:
        import torch_fl_dcu  # noqa: F401  (loads the bundle)
    except ImportError:
        pass  # recorded in torch_fl_dcu._preload; raised again when torch imports the vendor


_run()
