"""``python -m torch_fl_gcu``: what this build of torch-fl-gcu has (SDK, kernels, skipped ops)."""

from __future__ import annotations

import sys

from torch_fl_gcu import kernels_manifest, library_dir, sdk, sdk_info
from torch_fl_gcu.flaggems import enflame_triton


def main() -> int:
    info = sdk_info()
    manifest = kernels_manifest()
    print(f"torch-fl-gcu libraries: {library_dir()}")
    print(
        f"TopsRider SDK at build time: {info.get('tops_home', '?')} (emulator: {info.get('emulator', '?')})"
    )
    try:
        found = sdk.load()
        print(f"TopsRider SDK loaded: {found.runtime}, {found.aten} (from {found.source})")
    except sdk.SdkNotFoundError as exc:
        print(f"TopsRider SDK: not loaded: {exc}")
    gen = manifest.get("generated", {})
    functions = {fn for v in gen.values() for fn in v.split("+")}  # handwritten: "a+b+..."
    print(f"topsaten kernels: {len(gen)} aten overloads using {len(functions)} topsaten functions")
    for w in manifest.get("warnings", []):
        print(f"  skipped: {w}")
    ok, why = enflame_triton()
    print(f"FlagGems backend: {'active' if ok else 'inactive'} ({why})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
