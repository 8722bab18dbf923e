"""scikit-build-core metadata provider: a compiled torch-fl wheel requires the torch minor it was
built against (``torch>=2.X,<2.X+1``), plus the package's other requirements.

Its C++ compiles against one torch minor's headers and links against that torch's libraries, so
another minor would fail with undefined symbols, or worse, run with a different ABI. The torch the
build sees is the one the wheel will run with: there is no torch in ``build-system.requires``, so
a build with pip's default build isolation stops here with the fix instead of compiling against a
fresh torch download.

    [tool.scikit-build.metadata.dependencies]
    provider = "torch_pin"
    provider-path = "../../shared_build"
    requires = ["torch-fl-core>=0.1,<0.2"]
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from typing import Any

__all__ = ["dynamic_metadata", "torch_requirement"]


def torch_requirement(version: str) -> str:
    """``torch>=2.X,<2.X+1`` for an installed torch ``version`` ("2.13.0+cpu" -> 2.13)."""
    parts = version.split("+", 1)[0].split(".")
    major, minor = int(parts[0]), int(parts[1])
    return f"torch>={major}.{minor},<{major}.{minor + 1}"


def dynamic_metadata(
    field: str, settings: Mapping[str, Any] | None = None, project: Mapping[str, Any] | None = None
) -> list[str]:
    if field != "dependencies":
        raise RuntimeError(f"torch_pin provides 'dependencies', not {field!r}")
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(
            "torch-fl: this package compiles against the torch it will run with, and the build "
            "environment has no torch. Install torch first, then build without isolation: "
            "pip install --no-build-isolation <package dir> (the build dependencies are listed in "
            "the README's 'Building from source')."
        ) from None
    extra = list((settings or {}).get("requires", []))
    return [torch_requirement(version), *extra]
