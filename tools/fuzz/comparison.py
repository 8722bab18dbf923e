"""Comparing a program's CPU run with its flagos run statement by statement, and the rules
for the differences that are expected (CUDA's behaviour where CPU has no analogue)."""

from __future__ import annotations

import re

from .execution import GROWS, run_program

SAME_DEVICE = "Expected all tensors to be on the same device"
# The device errors a mixed-device statement may raise (messages normalized by norm_msg):
# the router's and TensorIterator's, and those of the kernels that check devices themselves
# before any routing (composites such as take_along_dim, cholesky_solve.out, cummax.out), which
# CUDA runs too and which raise the same there
DEVICE_ERRORS = re.compile(
    "|".join(
        [
            re.escape(SAME_DEVICE),
            r"Expected tensor to have cpu Device, but got tensor with cpu Device",
            r"\w+: Expected result and input tensors to be on the same device",
            r"Expected out tensor to have device cpu, but got cpu instead",
            r"^expected device cpu but found cpu$",
        ]
    )
)
MIX_OK = {
    "copy_",
    "copy_bcast",
    "to",
    "resize_as_",
    "getitem",
    "setitem",
    "index_put_",
    "index_put_acc",
    "conj_add",
    "type_as",
}


def mixes_devices(tags):
    """flagos:0 with flagos:1, or a flagos tensor with a non-0-dim CPU tensor."""
    kinds = {t for t in tags if t in ("D0", "D1", "CN")}
    return len(kinds) > 1


_ASSIGN = re.compile(r"^([A-Za-z_]\w*)\s*=(?!=)\s*(.*)$", re.S)
_SETITEM = re.compile(r"^([A-Za-z_]\w*)\[")
_OUT_KW = re.compile(r"\bout=\(?([A-Za-z_][\w, ]*)\)?")
_INPLACE_METHOD = re.compile(r"\.[A-Za-z]\w*_\(")
_FOREACH_INPLACE = re.compile(r"^torch\._foreach_\w+_\(\[([^\]]*)\]")
_RECEIVER = re.compile(r"^(?:torch\.\w+\()?([A-Za-z_]\w*)\b")


def written_vars(line):
    """The variables a statement writes: out= tensors, the self of an in-place method (through
    the views the statement takes of it), the target of an item assignment, and the written
    list of an in-place foreach op."""
    names = set()
    for m in _OUT_KW.finditer(line):
        names.update(n.strip() for n in m.group(1).split(",") if n.strip())
    m = _ASSIGN.match(line)
    if m is None:
        m = _SETITEM.match(line)
        if m:
            names.add(m.group(1))
        return names
    rhs = m.group(2)
    fe = _FOREACH_INPLACE.match(rhs)
    if fe:
        names.update(n.strip() for n in fe.group(1).split(",") if n.strip())
    elif _INPLACE_METHOD.search(rhs):
        r = _RECEIVER.match(rhs)
        if r and r.group(1) != "torch":
            names.add(r.group(1))
    return names


def writes_cpu_scalar(line, tags, line_tags):
    """Whether a statement with flagos operands writes a 0-dim CPU tensor."""
    flagos = any(t in ("D0", "D1") for t in line_tags)
    return flagos and any(tags.get(u) == "C0" for u in written_vars(line))


def first_diff(a, b, path=""):
    """The first differing path between two JSON-like values, or None."""
    if type(a) is not type(b):
        return f"{path}: {a!r:.300} != {b!r:.300}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: missing on one side ({a.get(k)!r:.200} / {b.get(k)!r:.200})"
            d = first_diff(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: len {len(a)} != {len(b)}: {a!r:.300} / {b!r:.300}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            d = first_diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if a != b:
        return f"{path}: {a!r:.300} != {b!r:.300}"
    return None


def strip_devices(o):
    """Drops devtype from a record where the flagos run legitimately has flagos vs cpu."""
    if isinstance(o, dict):
        return {k: strip_devices(v) for k, v in o.items() if k != "devtype"}
    if isinstance(o, list):
        return [strip_devices(v) for v in o]
    return o


# Composites that resize their out= tensor before the call that checks devices: ATen's stack_out
# resizes it, then cat_out raises (CUDA runs the same composite)
RESIZES_OUT_FIRST = {"stack_out"}


def resized_out_only(before, after, cpu_after, written):
    """The first difference between the states before and after a failed statement, where
    the written variables may differ only by having been resized to the geometry CPU's
    completed run gave them (their bytes are then uninitialized); None if there is none."""
    keep = [k for k in before if k.split("[")[0] not in written]
    d = first_diff(
        strip_devices({k: before[k] for k in keep}),
        strip_devices({k: after.get(k) for k in keep}),
    )
    if d:
        return d
    for k, v in after.items():
        if k.split("[")[0] in written:
            want = cpu_after.get(k, {})
            for field in ("dtype", "shape", "stride", "offset"):
                if v.get(field) != want.get(field):
                    return f".{k}.{field}: {v.get(field)!r} != {want.get(field)!r} (CPU's result)"
    return None


def device_tags(meta, tags):
    """Per statement, the device tags of the variables it uses."""
    return [[tags.get(u, "?") for u in m["uses"]] for m in meta]


def compare_program(lines, meta, tags):
    cpu, _ = run_program(lines, "cpu", "cpu")
    fl, _ = run_program(lines, "flagos:0", "flagos:1")
    tags_by_line = device_tags(meta, tags)
    for i in range(max(len(cpu), len(fl))):
        c = cpu[i] if i < len(cpu) else None
        f = fl[i] if i < len(fl) else None
        if c is None or f is None:
            return {"kind": "length", "line": i, "detail": "one run stopped early"}
        op = meta[i]["op"] if i < len(meta) else "?"
        mixed = mixes_devices(tags_by_line[i])
        written_cpu = not mixed and writes_cpu_scalar(lines[i], tags, tags_by_line[i])
        expected = "expected-written-cpu" if written_cpu else "expected-mixed"
        mixed = mixed or written_cpu
        cpu_out_dev = any(t in ("C0", "CN") for t in tags_by_line[i]) and "outalloc" != op
        allowed_mix = op in MIX_OK or op.startswith("_foreach_")
        fmsg = f["error"]["msg"] if f["error"] is not None else ""
        device_error = DEVICE_ERRORS.search(fmsg) is not None
        same_error = c["error"] is not None and c["error"] == f["error"]
        if mixed and allowed_mix and (same_error or (f["error"] is None and c["error"] is None)):
            mixed = False  # CUDA allows these (copies, CPU indices, per-index foreach): compare as usual
        op_error_first = False
        if mixed and same_error and not device_error:
            # An argument check before any device check (Python's argument parsing, a
            # composite's own checks) fails on both sides, as it would on CUDA: compare as usual
            mixed = False
            op_error_first = True
        if mixed:
            # flagos must raise the same-device error, having changed nothing.
            if device_error:
                prev = cpu[i - 1]["snap"] if i else {}
                d = first_diff(strip_devices(prev), strip_devices(f["snap"]))
                if d and op.startswith("_foreach_"):
                    # CUDA's per-index path: the indices before the failing one are written
                    return {"kind": expected, "line": i, "op": op}
                if d and op in RESIZES_OUT_FIRST:
                    d = resized_out_only(prev, f["snap"], c["snap"], written_vars(lines[i]))
                if d:
                    return {"kind": "mixed-device-wrote", "line": i, "op": op, "detail": d}
                return {"kind": expected, "line": i, "op": op}
            if c["error"] is not None and f["error"] is not None:
                return {
                    "kind": "mixed-both-error",
                    "line": i,
                    "op": op,
                    "detail": f"cpu {c['error']} / flagos {f['error']}",
                }
            return {
                "kind": "mixed-device-no-error",
                "line": i,
                "op": op,
                "detail": f"flagos: {f['error'] or 'computed'}; cpu: {c['error'] or 'computed'}",
            }
        ce, fe = c["error"], f["error"]
        if (ce is None) != (fe is None):
            return {
                "kind": "error-presence",
                "line": i,
                "op": op,
                "detail": f"cpu: {ce or 'computed'} | flagos: {fe or 'computed'}",
            }
        if ce is not None:
            if ce["type"] != fe["type"]:
                return {
                    "kind": "error-type",
                    "line": i,
                    "op": op,
                    "detail": f"cpu {ce} | flagos {fe}",
                }
            if ce["msg"] != fe["msg"]:
                return {
                    "kind": "error-msg",
                    "line": i,
                    "op": op,
                    "detail": f"cpu {ce['msg'][:300]!r} | flagos {fe['msg'][:300]!r}",
                }
        if c["warnings"] != f["warnings"]:
            return {
                "kind": "warnings",
                "line": i,
                "op": op,
                "detail": f"cpu {c['warnings']} | flagos {f['warnings']}",
            }
        cr, fr = c.get("result"), f.get("result")
        if (cr is None) != (fr is None):
            return {"kind": "result-presence", "line": i, "op": op}
        if cr is not None:
            crs, frs = strip_devices(cr), strip_devices(fr)
            if GROWS.search(lines[i]):
                crs, frs = _drop_bytes(crs), _drop_bytes(frs)
            d = first_diff(crs, frs)
            if d:
                return {"kind": "result", "line": i, "op": op, "detail": d}
            # devices: flagos results are flagos tensors unless CPU-only inputs
            dd = check_result_devices(fr, tags_by_line[i], cpu_out_dev)
            if dd:
                return {
                    "kind": "cpu-out" if dd.startswith("cpu-out") else "result-device",
                    "line": i,
                    "op": op,
                    "detail": dd,
                }
        d = first_diff(strip_devices(c["snap"]), strip_devices(f["snap"]))
        if d:
            kind = "state"
            before = cpu[i - 1]["snap"] if i else {}
            if (
                ce is not None
                and op.startswith("_foreach_")
                and op.endswith("_")
                and first_diff(strip_devices(before), strip_devices(f["snap"])) is None
            ):
                kind = "expected-foreach-partial"
            elif ce is not None:
                var = d.split(".")[1] if d.startswith(".") else None
                cv, fv = c["snap"].get(var), f["snap"].get(var)
                if (
                    cv
                    and fv
                    and (
                        cv["shape"] != fv["shape"]
                        or cv["nbytes"] != fv["nbytes"]
                        or cv["stride"] != fv["stride"]
                    )
                ):
                    kind = "resized-out-before-error"
            return {"kind": kind, "line": i, "op": op, "detail": d}
        if ce is not None:
            if op_error_first:
                return {"kind": "expected-mixed-op-error", "line": i, "op": op}
            return None
    return None


def _drop_bytes(o):
    if isinstance(o, dict):
        return {k: _drop_bytes(v) for k, v in o.items() if k != "bytes"}
    if isinstance(o, list):
        return [_drop_bytes(v) for v in o]
    return o


def check_result_devices(fr, tags, cpu_out):
    def walk(d):
        if d.get("kind") == "T":
            yield d
        for e in d.get("items", []):
            yield from walk(e)

    flagos_in = any(t in ("D0", "D1") for t in tags)
    for t in walk(fr):
        if flagos_in and t["devtype"] != "flagos":
            if cpu_out:
                return (
                    "cpu-out: "
                    + f"result on {t['devtype']} (an out= on the CPU) though flagos inputs (uses {tags})"
                )
            return f"result on {t['devtype']} though flagos inputs (uses {tags})"
    return None


# The verdicts that are counted, not reported (the module docstring of the package).
EXPECTED = {
    "expected-mixed",
    "expected-written-cpu",
    "expected-mixed-op-error",
    "expected-foreach-partial",
}
