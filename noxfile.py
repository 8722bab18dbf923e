"""Sessions for the torch-fl monorepo.

    nox -s demo          build core and run the main job (python -m torch_fl.demo)
    nox -s tests         build core and run its unit tests plus the contract suites (sim vendor);
                         then build torch-fl-gcu against the TopsRider emulator and run its tests
                         and the contract suites with FLAGOS_VENDOR=gcu; and the CPU-testable parts of
                         torch-fl-cuda and torch-fl-dcu (generators, preload guards, ABI tooling)
    nox -s build-gcu     build torch-fl-gcu against $TOPS_HOME, else against the emulator
    nox -s test-gcu      build-gcu, then the package's tests and the contract suites (FLAGOS_VENDOR=gcu)
    nox -s lint          ruff format --check + ruff check; clang-format --dry-run -Werror (C/C++)
    nox -s bench         benchmarks that run on this machine
    nox -s build-cuda    build core and install the cuda vendor (GPU machines: uses their torch)
    nox -s test-cuda     the cuda vendor's tests and the contract suites with FLAGOS_VENDOR=cuda
    nox -s build-dcu     build core and torch-fl-dcu; stages DTK's device libraries into it first when
                         $ROCM_PATH (or $FLAGOS_DCU_TORCH_LIB) holds DTK's torch
    nox -s test-dcu      build-dcu, the package's tests (CPU: fabricated libraries), and the contract
                         suites with FLAGOS_VENDOR=dcu where a DCU is present

Environment knobs:
    TORCH_FL_TORCH      pip requirement for torch (default: torch==2.13.0, the CPU CI wheel)
    TORCH_FL_SYSTEM_TORCH=1   reuse the interpreter's installed torch (GPU machines ship their own)
    TOPS_HOME           a TopsRider SDK to build torch-fl-gcu against (default: build the emulator)
"""

from __future__ import annotations

import os
from pathlib import Path

import nox

ROOT = Path(__file__).parent
CORE = ROOT / "packages" / "torch_fl_core"
CUDA = ROOT / "packages" / "torch_fl_cuda"
GCU = ROOT / "packages" / "torch_fl_gcu"
DCU = ROOT / "packages" / "torch_fl_dcu"
GCU_EMULATOR = GCU / "emulator"
BUILD_DEPS = ["scikit-build-core>=0.10", "nanobind>=2.0", "cmake>=3.26", "ninja", "pyyaml"]
#: Installed next to torch in every session that builds core: torch's numpy bridge is optional,
#: but without numpy every `import torch` prints "Failed to initialize NumPy".
RUN_DEPS = ["numpy"]
TEST_DEPS = ["pytest>=8", "pytest-timeout", "expecttest", "transformers>=4.40"]
SYSTEM_TORCH = os.environ.get("TORCH_FL_SYSTEM_TORCH") == "1"
TORCH_REQ = os.environ.get("TORCH_FL_TORCH", "torch==2.13.0")

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "venv"


def _venv_params() -> list[str]:
    return ["--system-site-packages"] if SYSTEM_TORCH else []


def _install_core(session: nox.Session, *extras: str) -> None:
    """Install torch (with numpy), build tools and torch-fl-core (incremental: build/ is kept)."""
    if not SYSTEM_TORCH:
        session.install(TORCH_REQ)
    session.install(*RUN_DEPS, *BUILD_DEPS, *extras)
    # No build isolation: the extension must compile against the torch that
    # will import it, not a fresh copy pip would download into a temp env.
    session.install("--no-build-isolation", "--no-deps", str(CORE))


def _tops_home(session: nox.Session) -> str:
    """$TOPS_HOME if set (a real SDK), else the TopsRider emulator, built and installed in-tree."""
    home = os.environ.get("TOPS_HOME")
    if home:
        session.log(f"torch-fl-gcu: building against TOPS_HOME={home}")
        return home
    build, prefix = GCU_EMULATOR / "build", GCU_EMULATOR / "prefix"
    session.log(f"torch-fl-gcu: TOPS_HOME is unset; building the TopsRider emulator into {prefix}")
    session.run(
        "cmake", "-S", str(GCU_EMULATOR), "-B", str(build), "-G", "Ninja",
        f"-DCMAKE_INSTALL_PREFIX={prefix}", "-DCMAKE_BUILD_TYPE=Release", silent=True,
    )  # fmt: skip
    session.run("cmake", "--build", str(build), silent=True)
    session.run("cmake", "--install", str(build), silent=True)
    return str(prefix)


def _install_gcu(session: nox.Session) -> None:
    """Build torch-fl-gcu (runtime over topsrt, generated topsaten kernels) into the session."""
    home = _tops_home(session)
    session.install("--no-build-isolation", "--no-deps", str(GCU), env={"TOPS_HOME": home})


def _test_gcu(session: nox.Session, args: list[str]) -> None:
    env = {"FLAGOS_VENDOR": "gcu"}
    _pytest(session, str(GCU / "tests"), *args, env=env)
    _pytest(session, str(ROOT / "tests"), *args, env=env)


def _pytest(session: nox.Session, *args: str, env: dict[str, str] | None = None) -> None:
    code = session.run("python", "-m", "pytest", *args, env=env, success_codes=[0, 5], silent=False)
    # Exit code 5 is "no tests collected": fine for an optional suite, but say so.
    if code == 5:
        session.warn(f"pytest collected no tests for {' '.join(args)}")


@nox.session(venv_params=_venv_params())
def demo(session: nox.Session) -> None:
    """Build core and run the demo (trains on flagos, checks against CPU)."""
    _install_core(session, "tqdm")
    session.run("python", "-m", "torch_fl.demo", *session.posargs)


@nox.session(venv_params=_venv_params())
def tests(session: nox.Session) -> None:
    """Core's unit tests and the contract suites on sim, then the same on the emulated GCU."""
    _install_core(session, *TEST_DEPS)
    # The cuda vendor package too: its generator, FlagGems discovery and vendor logic are tested
    # here; its GPU tests skip with the reason (nox -s test-cuda runs them on a GPU machine).
    session.install("--no-build-isolation", "--no-deps", str(CUDA))
    env = {"FLAGOS_VENDOR": os.environ.get("FLAGOS_VENDOR", "sim")}
    args = session.posargs or []
    _pytest(session, str(CORE / "tests"), *args, env=env)
    _pytest(session, str(CUDA / "tests"), *args, env=env)
    # torch-fl-dcu: preload guards, ABI shim and check, staging, routes, on fabricated libraries.
    session.install("--no-build-isolation", "--no-deps", str(DCU))
    _pytest(session, str(DCU / "tests"), *args, env=env)
    _pytest(session, str(ROOT / "tests"), *args, env=env)
    # The emulated Enflame GCU: torch-fl-gcu's tests and the same contract suites.
    _install_gcu(session)
    _test_gcu(session, args)


# GPU machines ship their own CUDA torch: the cuda sessions always reuse the interpreter's.
@nox.session(name="build-cuda", venv_params=["--system-site-packages"])
def build_cuda(session: nox.Session) -> None:
    """Build core against the interpreter's (CUDA) torch and install the cuda vendor."""
    session.install(*BUILD_DEPS)
    session.install("--no-build-isolation", "--no-deps", str(CORE))
    session.install("--no-build-isolation", "--no-deps", str(CUDA))


@nox.session(name="test-cuda", venv_params=["--system-site-packages"])
def test_cuda(session: nox.Session) -> None:
    """The cuda vendor's tests and every contract suite with FLAGOS_VENDOR=cuda (needs a GPU)."""
    build_cuda(session)
    env = {"FLAGOS_VENDOR": "cuda"}
    args = session.posargs or []
    _pytest(session, str(CUDA / "tests"), *args, env=env)
    _pytest(session, str(ROOT / "tests"), *args, env=env)


def _dtk_torch_lib() -> str | None:
    """DTK's torch/lib when this machine has DTK (what the staging tool would find), else None."""
    explicit = os.environ.get("FLAGOS_DCU_TORCH_LIB")
    if explicit:
        return explicit
    rocm = Path(os.environ.get("ROCM_PATH", "/opt/dtk"))
    found = sorted(rocm.glob("**/site-packages/torch/lib/libtorch_hip.so")) if rocm.is_dir() else []
    return str(found[0].parent) if found else None


def _install_dcu(session: nox.Session) -> None:
    """Install torch-fl-dcu; with DTK present, stage its device libraries into the wheel first."""
    dtk_lib = _dtk_torch_lib()
    if dtk_lib is None:
        session.log("torch-fl-dcu: no DTK torch under $ROCM_PATH: installing without a bundle")
    else:
        # Staged into the source tree (ignored by git) so the wheel built next carries it.
        session.install("--no-build-isolation", "--no-deps", str(DCU))
        session.run(
            "python", "-m", "torch_fl_dcu.tools.stage", "--dtk-torch-lib", dtk_lib,
            "--dest", str(DCU / "src" / "torch_fl_dcu" / "_bundle"),
            env={"FLAGOS_DCU_PRELOAD": "0"},
        )  # fmt: skip
    session.install("--no-build-isolation", "--no-deps", "--force-reinstall", str(DCU))


@nox.session(name="build-dcu", venv_params=_venv_params())
def build_dcu(session: nox.Session) -> None:
    """Build core and torch-fl-dcu (staging DTK's device libraries when DTK is installed)."""
    _install_core(session)
    _install_dcu(session)


@nox.session(name="test-dcu", venv_params=_venv_params())
def test_dcu(session: nox.Session) -> None:
    """build-dcu, the package's tests, and the contract suites with FLAGOS_VENDOR=dcu on a DCU."""
    _install_core(session, *TEST_DEPS)
    _install_dcu(session)
    args = session.posargs or []
    _pytest(session, str(DCU / "tests"), *args, env={"FLAGOS_VENDOR": "sim"})
    probe = "from torch_fl_dcu.vendor import vendor; print(int(vendor.is_present()))"
    present = session.run("python", "-c", probe, silent=True, env={"FLAGOS_VENDOR": "sim"})
    if str(present).strip().endswith("1"):
        _pytest(session, str(ROOT / "tests"), *args, env={"FLAGOS_VENDOR": "dcu"})
    else:
        session.warn("no DCU here: the contract suites with FLAGOS_VENDOR=dcu did not run")


@nox.session(name="build-gcu", venv_params=_venv_params())
def build_gcu(session: nox.Session) -> None:
    """Build core and torch-fl-gcu (against $TOPS_HOME, else the TopsRider emulator)."""
    _install_core(session)
    _install_gcu(session)


@nox.session(name="test-gcu", venv_params=_venv_params())
def test_gcu(session: nox.Session) -> None:
    """build-gcu, then the package's tests and the contract suites with FLAGOS_VENDOR=gcu."""
    _install_core(session, *TEST_DEPS)
    _install_gcu(session)
    _test_gcu(session, session.posargs or [])


@nox.session(venv_params=_venv_params())
def bench(session: nox.Session) -> None:
    """Run the benchmarks that this machine can run."""
    _install_core(session)
    for script in sorted((ROOT / "benchmarks").glob("[!_]*.py")):
        session.run("python", str(script), *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff", "clang-format")
    session.run("ruff", "format", "--check", ".")
    session.run("ruff", "check", ".")
    sources = session.run(
        "git", "ls-files", "*.c", "*.cpp", "*.h", "*.cu", external=True, silent=True
    ).split()
    session.run("clang-format", "--dry-run", "-Werror", *sources)
