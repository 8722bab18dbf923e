"""``python -m torch_fl_ascend``: what this build of torch-fl-ascend has (toolkit, kernels)."""

from __future__ import annotations

import sys

from torch_fl_ascend import kernels_manifest, library_dir, sdk, sdk_info
from torch_fl_ascend.flaggems import ascend_triton


def main() -> int:
    info = sdk_info()
    manifest = kernels_manifest()
    print(f"torch-fl-ascend libraries: {library_dir()}")
    print(
        f"CANN toolkit at build time: {info.get('cann_home', '?')} "
        f"(emulator: {info.get('emulator', '?')})"
    )
    try:
        found = sdk.load()
        print(f"CANN toolkit loaded: {', '.join(found.paths.values())} (from {found.source})")
    except sdk.SdkNotFoundError as exc:
        print(f"CANN toolkit: not loaded: {exc}")
    gen = manifest.get("generated", {})
    functions = {fn for v in gen.values() for fn in v.split("+")}  # handwritten: "a+b+..."
    print(f"ACLNN kernels: {len(gen)} aten overloads using {len(functions)} aclnn functions")
    for w in manifest.get("warnings", []):
        print(f"  skipped: {w}")
    ok, why = ascend_triton()
    print(f"FlagGems backend: {'active' if ok else 'inactive'} ({why})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
