"""packages/torch_fl_core/csrc/README.md maps every source file of core's C++, the kit and the
emulator framework: a file added without a line there, or a line left for a file that is gone,
fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.tooling

CORE = Path(__file__).resolve().parents[2] / "packages" / "torch_fl_core"
MAP = CORE / "csrc" / "README.md"
SOURCES = {
    "csrc": ("*.cpp", "*.h"),
    "include/torch_fl": ("*.h",),
    "src/torch_fl/kit": ("*.py",),
    "emulator_kit": ("*.cpp", "*.h"),
}
SUFFIXES = (".cpp`", ".h`", ".py`", ".*`")
#: The map also names Python files outside these folders (tests, tools): only C++ names are
#: checked for files that are gone.
CPP_SUFFIXES = (".cpp`", ".h`", ".*`")


def sources() -> list[Path]:
    found = []
    for folder, patterns in SOURCES.items():
        for pattern in patterns:
            found += (CORE / folder).rglob(pattern)
    return sorted(p for p in found if p.stem != "__init__")


def named_files(text: str, suffixes: tuple[str, ...] = SUFFIXES) -> set[str]:
    """The stems of the files the map names in code spans: `glue/stream_pool.*`, `views.cpp`,
    `kernel_ops.py` (placeholders such as `<sdk>_kernels.cpp` and globs left out)."""
    spans = (w.strip(",;:()") for w in text.split())
    stems = (
        span.strip("`").rsplit("/", 1)[-1].split(".")[0]
        for span in spans
        if span.startswith("`") and span.endswith(suffixes) and "<" not in span
    )
    return {stem for stem in stems if "*" not in stem}


def test_every_source_file_is_on_the_map():
    named = named_files(MAP.read_text())
    missing = [str(p.relative_to(CORE)) for p in sources() if p.stem not in named]
    assert not missing, f"{MAP.relative_to(CORE.parents[1])} does not name: {', '.join(missing)}"


def test_the_map_names_no_file_that_is_gone():
    stems = {p.stem for p in sources()}
    gone = sorted(named_files(MAP.read_text(), CPP_SUFFIXES) - stems)
    assert not gone, f"{MAP.name} names files that do not exist: {', '.join(gone)}"
