"""Generate the unboxed route kernels from the installed torch's schema.

Run by CMake at build time (never checked in): for every ATen overload with a
direct kernel for a device a box route reaches (CPU: box:cpu; CUDA: box:cuda,
the mirror of the cuda and dcu vendors) in torchgen's packaged
native_functions.yaml, emit one `torch_fl::unboxed::Register<at::_ops::NAME>`
line. The C++ template in
csrc/router/unboxed_route.h does the rest from the at::_ops struct's own
signature, so a new torch minor needs no edits here.

    python gen_unboxed_routes.py --out DIR [--shards N]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import torchgen
import yaml
from torchgen.model import FunctionSchema

# Argument types the box path has no meaning for; those ops are core-native
# (set_, record_stream) or not device kernels.
SKIP_ARG_TYPES = ("Storage", "Stream")

# Overloads whose unboxed route kernel core writes itself (csrc/aten/convolution.cpp: the route
# kernel plus the layout rule of a flagos convolution's answer).
CORE_WRITTEN = frozenset({"aten::convolution", "aten::convolution_backward"})


def native_functions() -> list[dict]:
    path = Path(torchgen.__file__).parent / "packaged" / "ATen" / "native" / "native_functions.yaml"
    with open(path) as f:
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


# The dispatch keys of the ATen backends box routes redispatch to. CUDA-only
# overloads (the fused attention kernels SDPA picks on the GPU, cuDNN ops,
# ...) took the boxed path before: about 1-2 us more per call on the H200 host.
BOX_KEYS = ("CPU", "CUDA")


def has_device_kernel(entry: dict) -> bool:
    # ufunc operators (add.out, ...) get their kernels from `ufunc_inner_loop`, not `dispatch`.
    if entry.get("ufunc_inner_loop"):
        return True
    dispatch = entry.get("dispatch") or {}
    return any(key in [k.strip() for k in keys.split(",")] for keys in dispatch for key in BOX_KEYS)


def routable() -> list[tuple[str, str, str, str]]:
    """(full name 'aten::add.out', at::_ops struct, header root, signature) per overload.

    Overloads with a CPU or CUDA kernel of their own, and the functional/in-place
    forms of structured ops (`structured_delegate`), whose kernels are
    generated from the delegate's: routing those directly avoids running the
    structured meta function twice (once on flagos, once on the aliases).
    """
    entries = native_functions()
    with_kernel = {e["func"].split("(")[0] for e in entries if has_device_kernel(e)}
    out = []
    for entry in entries:
        delegate = entry.get("structured_delegate")
        if not has_device_kernel(entry) and not (delegate and delegate in with_kernel):
            continue
        schema = FunctionSchema.parse(entry["func"])
        if any(t in str(a.type) for a in schema.arguments.flat_all for t in SKIP_ARG_TYPES):
            continue
        name = str(schema.name.name)
        overload = schema.name.overload_name
        full = f"aten::{name}.{overload}" if overload else f"aten::{name}"
        if full in CORE_WRITTEN:
            continue
        struct = f"{name}_{overload}" if overload else name
        out.append((full, struct, schema.name.name.base, signature(schema)))
    return sorted(out)


def signature(schema: FunctionSchema) -> str:
    """What decides the overload's C++ signature: argument and return types, and which are
    written (``Tensor(a!)`` is ``at::Tensor&``); names and defaults do not."""

    def types(items) -> str:
        return ",".join(
            str(x.type) + ("!" if x.annotation is not None and x.annotation.is_write else "")
            for x in items
        )

    return f"({types(schema.arguments.flat_all)})->({types(schema.returns)})"


# Relative compile cost of one C++ signature's route body against one overload's own lines
# (its registration and the shim that passes its redispatch function): the body is
# instantiated once per signature and file, so overloads of one signature share a file.
SIGNATURE_COST = 8


def shard(ops: list[tuple[str, str, str, str]], shards: int) -> list[list]:
    """Overloads grouped by signature, the groups spread over ``shards`` files by cost
    (largest first into the cheapest file); deterministic."""
    groups: dict[str, list] = {}
    for op in ops:
        groups.setdefault(op[3], []).append(op)
    files: list[list] = [[] for _ in range(shards)]
    cost = [0] * shards
    for key in sorted(groups, key=lambda k: (-len(groups[k]), k)):
        i = min(range(shards), key=lambda j: (cost[j], j))
        files[i] += groups[key]
        cost[i] += SIGNATURE_COST + len(groups[key])
    return [sorted(f) for f in files]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args()
    ops = routable()
    args.out.mkdir(parents=True, exist_ok=True)
    for index, mine in enumerate(shard(ops, args.shards)):
        headers = sorted({root for _, _, root, _ in mine})
        lines = [
            "// Generated by tools/gen_unboxed_routes.py from the installed torch. Do not edit.",
            '#include "router/unboxed_route.h"',
            *(f"#include <ATen/ops/{root}_ops.h>" for root in headers),
            "",
            "namespace torch_fl::unboxed {",
            "namespace {",
        ]
        for i, (full, struct, _, _) in enumerate(mine):
            lines.append(f'const Register<at::_ops::{struct}> r{i}("{full}");')
        lines += ["}  // namespace", "}  // namespace torch_fl::unboxed", ""]
        text = "\n".join(lines)
        path = args.out / f"unboxed_routes_{index}.cpp"
        # Leave the file untouched when nothing changed, so builds stay incremental.
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    print(f"gen_unboxed_routes: {len(ops)} overloads in {args.shards} files", file=os.sys.stderr)


if __name__ == "__main__":
    main()
