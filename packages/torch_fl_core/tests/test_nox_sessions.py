"""The repository's nox sessions (noxfile.py), run against a recording stand-in for nox: what
each session installs and builds. Every session that imports torch needs numpy there, or ``import
torch`` prints "Failed to initialize NumPy" (torch's numpy bridge is optional but always tried);
and core is compiled once per torch minor and source state, whichever sessions run."""

from __future__ import annotations

import importlib.util
import re
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


@pytest.fixture
def noxfile(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "nox", _fake_nox())
    monkeypatch.delenv("TORCH_FL_SYSTEM_TORCH", raising=False)
    spec = importlib.util.spec_from_file_location("noxfile_under_test", NOXFILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
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
