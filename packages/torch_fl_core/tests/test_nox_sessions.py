"""The repository's nox sessions (noxfile.py), run against a recording stand-in for nox: what
each session installs and builds. Every session that imports torch needs numpy there, or ``import
torch`` prints "Failed to initialize NumPy" (torch's numpy bridge is optional but always tried);
and core is compiled once per torch minor and source state, whichever sessions run."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
import types
from pathlib import Path

import pytest

NOXFILE = Path(__file__).resolve().parents[3] / "noxfile.py"


class RecordingSession:
    """What noxfile.py's sessions call on a nox Session, recorded instead of run."""

    def __init__(self, torch: str = "2.13.0") -> None:
        self.posargs: list[str] = []
        self.installed: list[str] = []
        self.ran: list[tuple[str, ...]] = []
        self.notified: list[str] = []
        self.env: dict[str, str] = {}
        self.torch = torch

    def install(self, *args: str, **_kw) -> None:
        self.installed.extend(a for a in args if not a.startswith("-"))

    def run(self, *args: str, **_kw) -> str:
        self.ran.append(args)
        if "wheel" in args and "-w" in args:  # pip wheel: leave a wheel where it was asked for
            out = Path(args[args.index("-w") + 1])
            name = Path(args[-1]).name
            (out / f"{name}-0.1.0-cp311-cp311-linux_x86_64.whl").write_bytes(b"")
        return f"{self.torch}\n"  # what the torch version probe prints

    def log(self, *_a, **_kw) -> None:
        pass

    def warn(self, *_a, **_kw) -> None:
        pass

    def notify(self, name: str, *_a, **_kw) -> None:
        self.notified.append(name)

    def error(self, *args) -> None:
        raise RuntimeError(" ".join(map(str, args)))

    def chdir(self, _path):
        import contextlib

        return contextlib.nullcontext()

    def builds(self) -> list[str]:
        """The packages pip wheel built, in order."""
        return [Path(a[-1]).name for a in self.ran if "wheel" in a and "-w" in a]


def _fake_nox() -> types.ModuleType:
    nox = types.ModuleType("nox")

    def session(func=None, **_kw):
        return func if func is not None else (lambda f: f)

    def parametrize(*_a, **_kw):
        return lambda f: f

    nox.session = session
    nox.parametrize = parametrize
    nox.Session = RecordingSession
    nox.options = types.SimpleNamespace()
    return nox


def _toml_parser() -> types.ModuleType:
    """tomllib, or on Python 3.10 tomli (its source; nox depends on it there)."""
    return pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")


def load_noxfile(path: Path, monkeypatch) -> types.ModuleType:
    """``path`` (a noxfile.py beside its packages/vendors.toml) imported with the stand-in nox."""
    monkeypatch.setitem(sys.modules, "nox", _fake_nox())
    monkeypatch.delenv("TORCH_FL_SYSTEM_TORCH", raising=False)
    spec = importlib.util.spec_from_file_location("noxfile_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def noxfile(monkeypatch, tmp_path):
    module = load_noxfile(NOXFILE, monkeypatch)
    monkeypatch.setattr(module, "WHEEL_CACHE", tmp_path / "wheels")
    monkeypatch.setattr(module, "DIST", tmp_path / "dist")
    return module


def _requirement_names(installed: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[ ]", req, maxsplit=1)[0].lower() for req in installed}


@pytest.mark.parametrize("name", ["demo", "bench", "tests"])
def test_sessions_that_import_torch_install_numpy(noxfile, name):
    session = RecordingSession()
    getattr(noxfile, name)(session)
    names = _requirement_names(session.installed)
    assert "torch" in names, session.installed
    assert "numpy" in names, f"nox -s {name} installs {session.installed} but not numpy"


def test_demo_then_tests_compile_core_once(noxfile):
    """The README's two commands: core's wheel is built by the first and reused by the second
    (and by the install check it triggers); the smoke set on the oldest torch builds its own."""
    demo, tests = RecordingSession(), RecordingSession()
    noxfile.demo(demo)
    noxfile.tests(tests)
    assert demo.builds() == ["torch_fl_core"]
    assert "torch_fl_core" not in tests.builds(), tests.builds()
    assert tests.notified == ["install-check", "smoke"]
    install_check = RecordingSession()
    noxfile.install_check(install_check)
    assert "torch_fl_core" not in install_check.builds(), install_check.builds()
    smoke = RecordingSession(torch="2.10.0")
    noxfile.smoke(smoke)
    assert smoke.builds() == ["torch_fl_core"], "another torch minor is another build"


def test_a_source_change_rebuilds_core(noxfile, monkeypatch):
    first, second = RecordingSession(), RecordingSession()
    noxfile.demo(first)
    real = noxfile._source_key
    monkeypatch.setattr(noxfile, "_source_key", lambda paths, extra="": real(paths, extra) + "x")
    noxfile.demo(second)
    assert first.builds() == second.builds() == ["torch_fl_core"]


def test_every_vendor_of_the_table_has_its_sessions(noxfile):
    for name in noxfile.VENDORS:
        assert f"build-{name}" in noxfile.SESSIONS and f"test-{name}" in noxfile.SESSIONS


def test_a_vendor_find_module_keys_only_its_own_wheel(noxfile):
    """A vendor's CMake Find module for its SDK lives in its package (``cmake/``), not in the
    shared CMake every package's wheel is keyed on: changing it rebuilds that vendor only."""
    root = noxfile.ROOT
    assert not sorted((root / "shared_cmake").glob("Find*.cmake"))
    modules = sorted(root.glob("packages/*/cmake/Find*.cmake"))
    assert modules, "no Find module under packages/<vendor>/cmake/"
    for module in modules:
        rel = module.relative_to(root).as_posix()
        keyed = [
            name
            for name in noxfile.PACKAGES
            if any(rel.startswith(f"{path}/") for path in noxfile._key_paths(name))
        ]
        owner = [n for n, e in noxfile.PACKAGES.items() if rel.startswith(f"{e['path']}/")]
        assert keyed == owner and len(owner) == 1, (rel, keyed)


def test_below_python_3_11_the_table_is_read_with_tomli(monkeypatch, tmp_path):
    """Python 3.10 has no tomllib: the noxfile reads packages/vendors.toml with tomli (the parser
    tomllib was made from), so a list-valued ``sdk_env`` (ascend's) stays a list: its second
    variable is honoured, and with none set the emulator is built for the first."""
    root = tmp_path / "repo"
    (root / "packages").mkdir(parents=True)
    shutil.copy2(NOXFILE, root / "noxfile.py")
    (root / "packages" / "vendors.toml").write_text(
        '[core]\npath = "packages/core"\ntag = "core-v"\ncompiled = true\n\n'
        '[vendor.npu]\npath = "packages/npu"\ntag = "npu-v"\ncompiled = true\n'
        'sdk_env = [\n  "NPU_TOOLKIT_HOME",  # the first set wins\n  "NPU_HOME",\n]\n'
        'emulator = "emulator"\ncontracts = "ci"\n'
    )
    parser = _toml_parser()
    parsed: list[str] = []

    class Tomli:  # tomli's loads(), recording that it was the parser used
        @staticmethod
        def loads(text: str) -> dict:
            parsed.append(text)
            return parser.loads(text)

    monkeypatch.setitem(sys.modules, "tomllib", None)  # `import tomllib` fails, as on 3.10
    monkeypatch.setitem(sys.modules, "tomli", Tomli)
    module = load_noxfile(root / "noxfile.py", monkeypatch)
    assert parsed, "the noxfile did not read the table with tomli"
    assert module.VENDORS["npu"]["sdk_env"] == ["NPU_TOOLKIT_HOME", "NPU_HOME"]
    assert {"build-npu", "test-npu"} <= set(module.SESSIONS)

    monkeypatch.delenv("NPU_TOOLKIT_HOME", raising=False)
    monkeypatch.setenv("NPU_HOME", "/opt/npu")
    assert module._sdk_env(RecordingSession(), "npu") == {"NPU_HOME": "/opt/npu"}
    monkeypatch.delenv("NPU_HOME")
    session = RecordingSession()
    prefix = root / "packages" / "npu" / "emulator" / "prefix"
    assert module._sdk_env(session, "npu") == {"NPU_TOOLKIT_HOME": str(prefix)}
    assert session.ran[0][:3] == ("cmake", "-S", str(prefix.parent))


def test_the_noxfile_declares_tomli_for_python_3_10():
    """nox reads the noxfile's PEP 723 block and makes sure what it lists is installed."""
    block = re.search(r"^# /// script\n(.*?)^# ///$", NOXFILE.read_text(), re.S | re.M)
    assert block, "noxfile.py has no PEP 723 script block"
    meta = _toml_parser().loads("\n".join(ln[2:] for ln in block.group(1).splitlines()))
    assert "tomli; python_version < '3.11'" in meta["dependencies"], meta


def test_readme_quickstart_works_where_pip_refuses_the_system_python():
    """Debian/Ubuntu's Python refuses `pip install` outside a venv (PEP 668,
    "externally-managed-environment"): the quickstart makes one before the two commands, which
    stay as they are."""
    text = (NOXFILE.parent / "README.md").read_text()
    section = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the two commands' code block is missing"
    lines = [ln.split("#", 1)[0].strip() for ln in block.group(1).splitlines()]
    lines = [ln for ln in lines if ln]
    assert lines[-2:] == ["pip install nox && nox -s demo", "pip install nox && nox -s tests"]
    setup = lines[:-2]
    assert any(re.match(r"python3 -m venv \S+ && \. \S+/bin/activate$", ln) for ln in setup), lines
    assert "externally-managed-environment" in section
