"""PyTorch's own device-generic test files on flagos, against a native device: flagos-only failures.

PyTorch's test files (``test_indexing.py``, ``test_sparse.py``, ...) instantiate their test
classes per device type; ``PYTORCH_TESTING_DEVICE_ONLY_FOR`` picks one. This runs the given files
twice, once for ``flagos`` and once for the native device flagos is compared with (``cpu``, or
``cuda`` on the cuda vendor), pairs each test with its counterpart by name (the device is taken
out of the class and test names) and reports the tests that fail on flagos only. A test that also
fails natively is the test file's own disagreement with this torch (files from another release
fail this way), not flagos's; a test with no native counterpart (``onlyCUDA``, ``onlyCPU``) is
listed apart.

The files come from a PyTorch checkout of the installed torch's release (its ``test/`` folder);
they need ``expecttest`` (and ``hypothesis`` for some). Example, on sim::

    FLAGOS_VENDOR=sim python tools/pytorch_suites.py --tests ~/pytorch/test \\
        test_indexing.py test_sort_and_select.py --against cpu --json /tmp/suites.json

On a CUDA-backed vendor, a test that makes a CUDA kernel assert (an out-of-bounds index; CUDA's
own variants skip those tests, flagos's run them) leaves its worker's CUDA context unusable and
every later test on that worker fails too. Such failures are reported as device asserts; rerun
with ``-k "not NAME"`` for the test named first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

#: The names PyTorch's test instantiation gives the flagos device type: its own, or PrivateUse1's
#: when a file instantiated its classes before torch_fl renamed the backend.
FLAGOS_NAMES = ("flagos", "privateuse1")

DEVICE_ASSERT = "device-side assert triggered"

#: Failures that are not flagos's, with why (and which tests a vendor must not run).
EXPLAINED = Path(__file__).with_name("pytorch_suites.json")


def explained_for(vendor: str) -> list[dict]:
    entries = json.loads(EXPLAINED.read_text())["explained"]
    return [e for e in entries if vendor in e.get("vendors", [vendor])]


def _dtype_names() -> tuple[str, ...]:
    import torch

    names = {n for n in dir(torch) if isinstance(getattr(torch, n, None), torch.dtype)}
    return tuple(sorted(names, key=len, reverse=True))


#: A test's dtype variant: one dtype name or several joined by ``_`` (``float32``,
#: ``int64_float16``).
_DTYPE = "|".join(_dtype_names())
_VARIANT = re.compile(rf"(?:{_DTYPE})(?:_(?:{_DTYPE}))*")


def explanation(key: str, entries: list[dict], message: str | None = None) -> dict | None:
    """The entry that names ``key`` (a device-free test id), or one of its dtype variants; an
    entry marked ``"parametrized"`` also names the test's ``parametrize_test`` variants (any
    suffix). An entry with a ``"message"`` explains a failure only when the failure's message
    contains it (``message=None``: a passing test, matched by name alone), so that the same test
    failing another way is still reported."""
    for entry in entries:
        name = entry["test"]
        named = key == name
        if not named and key.startswith(name + "_"):
            variant = key[len(name) + 1 :]
            named = entry.get("parametrized", False) or (
                _VARIANT.fullmatch(variant) is not None
                and variant in entry.get("dtypes", [variant])
            )
        if named and (message is None or entry.get("message", "") in message):
            return entry
    return None


def deselection(device: str, entries: list[dict], keyword: str | None) -> list[str]:
    """The ``-k`` expression that leaves out the tests a vendor must not run, on one side."""
    names = [f"{e['test'].rsplit('::', 1)[-1]}_{device}" for e in entries if e.get("deselect")]
    parts = [f"({keyword})"] if keyword else []
    parts += [f"not {n}" for n in names]
    return ["-k", " and ".join(parts)] if parts else []


@dataclass
class Outcome:
    status: str  # passed, failed, skipped
    message: str = ""


@dataclass
class Side:
    device: str
    tests: dict[str, Outcome] = field(default_factory=dict)
    seconds: float = 0.0
    exit_code: int = 0


def device_free(test_id: str, names: tuple[str, ...]) -> str:
    """``file::ClassFLAGOS::test_x_flagos_float32`` -> ``file::Class::test_x_float32``.

    The device is the last occurrence of its name in the test's name: the name before it may
    contain another device's name (``test_cpu_indices_flagos``). A class instantiated before
    torch_fl named the backend ends in ``PRIVATEUSE1`` while its tests end in ``_flagos``."""
    *parts, test = test_id.split("::")
    generic = False
    if len(parts) > 1:
        for name in names:
            if parts[-1].upper().endswith(name.upper()):
                parts[-1] = parts[-1][: -len(name)]
                generic = True
                break
    # A class that is not instantiated per device keeps its tests' names as written.
    for name in names if generic else ():
        found = [m.start() for m in re.finditer(rf"_{name}(?=_|$)", test)]
        if found:
            test = test[: found[-1]] + test[found[-1] + len(name) + 1 :]
            break
    return "::".join([*parts, test])


def parse_junit(path: Path) -> dict[str, Outcome]:
    out: dict[str, Outcome] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        module, _, cls = case.get("classname", "").rpartition(".")
        file_name = module.replace(".", "/") + ".py" if module else cls
        test_id = f"{file_name}::{cls}::{case.get('name')}"
        status, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                status = "failed"
                message = (child.get("message") or child.text or "").strip()
                break
            if child.tag == "skipped":
                status = "skipped"
        out[test_id] = Outcome(status, message)
    return out


def run_side(
    device: str, tests_dir: Path, files: list[str], workers: int, timeout: int, extra: list[str]
) -> Side:
    side = Side(device)
    with tempfile.TemporaryDirectory() as tmp:
        junit, ini = Path(tmp) / "junit.xml", Path(tmp) / "pytest.ini"
        # An empty configuration, rooted at the test folder: test ids relative to it, and no
        # options of a project the folder happens to sit in.
        ini.write_text("[pytest]\n")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rN"]
        cmd += ["-c", str(ini), "--rootdir", str(tests_dir)]
        cmd += ["-n", str(workers)] if workers > 1 else []
        cmd += [f"--junitxml={junit}", f"--timeout={timeout}", *extra, *files]
        env = {**os.environ, "PYTORCH_TESTING_DEVICE_ONLY_FOR": device}
        if device not in FLAGOS_NAMES:
            # The native side runs without torch-fl: with any PrivateUse1 backend registered,
            # torch's autograd engine asserts on a backward over CUDA tensors (its accelerator is
            # then PrivateUse1), which would make every CUDA backward test fail natively.
            env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=tests_dir, env=env, stdout=subprocess.DEVNULL)
        side.seconds = time.monotonic() - start
        side.exit_code = proc.returncode
        if not junit.exists():
            raise SystemExit(f"pytest wrote no results for {device} (exit {proc.returncode})")
        side.tests = parse_junit(junit)
    return side


def compare(flagos: Side, native: Side, entries: list[dict]) -> dict:
    native_by = {device_free(t, (native.device,)): o for t, o in native.tests.items()}
    rows: dict[str, list[dict]] = {
        "flagos_only": [],
        "both_fail": [],
        "no_counterpart": [],
        "native_only": [],
        "explained": [],
        "explained_passing": [],
    }
    asserts = []
    # Per entry: a test it names passed, one of its failures was explained by it.
    passes: dict[str, str] = {}
    explains: set[str] = set()
    for test_id, outcome in sorted(flagos.tests.items()):
        key = device_free(test_id, FLAGOS_NAMES)
        twin = native_by.get(key)
        failed = outcome.status == "failed"
        known = explanation(key, entries, outcome.message or "" if failed else None)
        if known and outcome.status == "passed" and not known.get("varies"):
            passes.setdefault(known["test"], test_id)
        if failed and known:
            explains.add(known["test"])
            rows["explained"].append({"test": test_id, "reason": known["reason"]})
        elif failed:
            entry = {"test": test_id, "message": outcome.message.splitlines()[0][:300]
                     if outcome.message else ""}  # fmt: skip
            if DEVICE_ASSERT in outcome.message:
                asserts.append(test_id)
            if twin is None or twin.status == "skipped":
                rows["no_counterpart"].append(entry)
            elif twin.status == "failed":
                rows["both_fail"].append(entry)
            else:
                rows["flagos_only"].append(entry)
        elif outcome.status == "passed" and twin is not None and twin.status == "failed":
            rows["native_only"].append({"test": test_id})
    # Stale: an entry whose tests pass and none fails its way (a parametrized test's other
    # variants pass all along).
    rows["explained_passing"] = [
        {"test": test_id, "entry": name} for name, test_id in passes.items() if name not in explains
    ]
    counts = {
        side.device: {
            s: sum(o.status == s for o in side.tests.values())
            for s in ("passed", "failed", "skipped")
        }
        for side in (flagos, native)
    }
    return {"counts": counts, "device_asserts": asserts, **rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="test files, relative to --tests")
    parser.add_argument("--tests", type=Path, required=True, help="PyTorch's test/ folder")
    parser.add_argument("--against", default="cpu", help="the native device (cpu, cuda)")
    parser.add_argument("--workers", type=int, default=max(1, min(8, (os.cpu_count() or 2))))
    parser.add_argument("--timeout", type=int, default=300, help="seconds per test")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression for both sides")
    parser.add_argument("--json", type=Path, help="write the comparison here")
    args = parser.parse_args(argv)
    args.tests = args.tests.resolve()
    missing = [f for f in args.files if not (args.tests / f).is_file()]
    if missing:
        parser.error(f"not in {args.tests}: {', '.join(missing)}")
    import torch_fl

    vendor = torch_fl.vendor().name
    entries = explained_for(vendor)
    sides = []
    for device in ("flagos", args.against):
        extra = deselection(device, entries, args.keyword)
        sides.append(run_side(device, args.tests, args.files, args.workers, args.timeout, extra))
    flagos, native = sides
    result = compare(flagos, native, entries)
    result.update(
        files=args.files,
        against=args.against,
        vendor=vendor,
        deselected=[e["test"] for e in entries if e.get("deselect")],
        seconds={"flagos": round(flagos.seconds, 1), args.against: round(native.seconds, 1)},
    )
    report(result, args.against)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 1 if result["flagos_only"] else 0


def report(result: dict, against: str) -> None:
    print(f"vendor {result['vendor']}, against {against}; {', '.join(result['files'])}")
    for device, c in result["counts"].items():
        print(f"{device:>8}: {c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
    for name in result["deselected"]:
        print(f"  not run on this vendor: {name}")
    print(
        f"fail on both: {len(result['both_fail'])}; pass on flagos only:"
        f" {len(result['native_only'])}; explained: {len(result['explained'])}"
    )
    for row in result["explained"]:
        print(f"  explained: {row['test']}")
    for row in result["explained_passing"]:
        print(f"  explained but passes now (remove it from pytorch_suites.json): {row['entry']}")
    for row in result["no_counterpart"]:
        print(f"  fails on flagos, no {against} counterpart: {row['test']}: {row['message'][:160]}")
    if result["device_asserts"]:
        print(
            f"{len(result['device_asserts'])} failures report a device-side assert: the first test"
            " that made a kernel assert spoiled its worker; rerun without it (-k)"
        )
    print(f"flagos-only failures: {len(result['flagos_only'])}")
    for row in result["flagos_only"]:
        print(f"  {row['test']}: {row['message'][:160]}")


if __name__ == "__main__":
    sys.exit(main())
