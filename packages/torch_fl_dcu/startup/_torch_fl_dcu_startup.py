"""Start-up hook of torch-fl-dcu, run by ``torch_fl_dcu.pth`` in every interpreter of the environment.

The DTK bundle must be loaded before ``import torch`` (see torch_fl_dcu._preload), and torch's own
autoload of torch_fl comes at the end of ``import torch``, too late. So the wheel installs this
``.pth`` hook. It costs a few stats when there is no bundle and imports nothing more then.

It never raises and never prints a traceback: most interpreters of the environment have nothing to
do with torch. A bundle that cannot load is recorded and raised again by the ``import
torch_fl_dcu`` that ``import torch`` does (through torch_fl's vendor discovery), where the user sees
it with the fix. A ``bundle.json`` that cannot be used at all (unreadable, not a JSON object, a
field of the wrong type), and any unexpected failure of the hook itself, is also reported here, as
one warning line on stderr naming the file, the field and the fix.
"""

import os
import sys


def _warn(message: str) -> None:
    try:
        text = message.removeprefix("torch-fl-dcu: ")
        sys.stderr.write(f"torch-fl-dcu: warning (start-up hook torch_fl_dcu.pth): {text}\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - no stderr: nothing to tell
        pass


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
    manifest = os.path.join(bundle, "bundle.json")
    if not os.path.exists(manifest):
        return
    try:
        import torch_fl_dcu  # noqa: F401  (loads the bundle)
    except ImportError as exc:
        # Recorded in torch_fl_dcu._preload and raised again when torch imports the vendor.
        from torch_fl_dcu._preload import DcuManifestError

        if isinstance(exc, DcuManifestError):
            _warn(str(exc))
    except Exception as exc:  # noqa: BLE001 - never break interpreter start-up
        _warn(
            f"the start-up hook failed ({type(exc).__name__}: {exc}) while loading the DTK bundle "
            f"at {bundle} ({manifest}); set FLAGOS_DCU_PRELOAD=0 to skip it"
        )


try:
    _run()
except Exception as _exc:  # noqa: BLE001
    _warn(f"the start-up hook failed: {type(_exc).__name__}: {_exc}; FLAGOS_DCU_PRELOAD=0 skips it")
