"""The repository's nox sessions (noxfile.py), run against a recording stand-in for nox: what
each session installs. Every session that imports torch needs numpy there, or ``import torch``
prints "Failed to initialize NumPy" (torch's numpy bridge is optional but always tried)."""

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

    def __init__(self) -> None:
        self.posargs: list[str] = []
        self.installed: list[str] = []
        self.ran: list[tuple[str, ...]] = []

    def install(self, *args: str, **_kw) -> None:
        self.installed.extend(a for a in args if not a.startswith("-"))

    def run(self, *args: str, **_kw) -> str:
        self.ran.append(args)
        return ""

    def log(self, *_a, **_kw) -> None:
        pass

    def warn(self, *_a, **_kw) -> None:
        pass


def _fake_nox() -> types.ModuleType:
    nox = types.ModuleType("nox")

    def session(func=None, **_kw):
        return func if func is not None else (lambda f: f)

    nox.session = session
    nox.Session = RecordingSession
    nox.options = types.SimpleNamespace()
    return nox


@pytest.fixture
def noxfile(monkeypatch):
    monkeypatch.setitem(sys.modules, "nox", _fake_nox())
    monkeypatch.delenv("TORCH_FL_SYSTEM_TORCH", raising=False)
    spec = importlib.util.spec_from_file_location("noxfile_under_test", NOXFILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
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
