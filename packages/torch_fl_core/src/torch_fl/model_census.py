"""The model census of a native vendor: the tiny Hugging Face models of the contract suite
(``tests/contract/test_models.py``), one forward and one backward each, and how many of their
routed operator calls the vendor's kernels served against the CPU fallback.

A vendor package's ``tests/test_census.py`` asserts on it (:func:`census_of`) and writes it
(``python packages/torch_fl_<v>/tests/test_census.py --write``: the JSON under
``docs/data/census/<vendor>.json`` and the table between the ``model census`` markers of the
vendor's page, generated from that JSON, never by hand).
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["census_of", "documented", "load_zoo", "rows", "shares", "table", "write"]

BEGIN, END = "<!-- model census: begin -->", "<!-- model census: end -->"


def load_zoo(root: Path) -> ModuleType:
    """The model zoo (``BUILDERS``, ``make_inputs``, ``loss_of``) of the contract suite of the
    monorepo at ``root``."""
    contract = str(root / "tests" / "contract")
    sys.path.insert(0, contract)
    try:
        import test_models as zoo
    finally:
        sys.path.remove(contract)
    return zoo


def census_of(zoo: ModuleType, name: str) -> tuple[dict[str, dict[str, int]], float, float]:
    """(per-op per-backend calls, flagos loss, CPU loss) of one forward + backward of ``name``."""
    import torch

    from torch_fl import census

    torch.manual_seed(0)
    cpu = zoo.BUILDERS[name]()
    model = copy.deepcopy(cpu).to("flagos")
    inputs = zoo.make_inputs(name)
    with census.counting() as counts:
        _, loss = zoo.loss_of(name, model, {k: v.to("flagos") for k, v in inputs.items()})
        loss.backward()
        value = loss.item()
    _, ref = zoo.loss_of(name, cpu, inputs)
    return dict(counts), value, ref.item()


def shares(counts: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """backend -> calls."""
    out: dict[str, int] = {}
    for per in counts.values():
        for backend, n in per.items():
            out[backend] = out.get(backend, 0) + n
    return out


def rows(zoo: ModuleType, backend: str) -> list[dict[str, Any]]:
    """One record per model: calls in all, on ``backend``, on the CPU fallback, and the fallback
    operators with their calls."""
    import torch

    from torch_fl import census

    out = []
    for name in zoo.BUILDERS:
        counts, value, ref = census_of(zoo, name)
        by = shares(counts)
        fallback = census.fallback_ops(counts)
        out.append(
            {
                "model": name,
                "calls": sum(by.values()),
                "native": by.get(backend, 0),
                "cpu": by.get(census.FALLBACK, 0),
                "loss_delta": abs(value - ref),
                "fallback_ops": {
                    op.removeprefix("aten::"): n for op, n in sorted(fallback.items())
                },
                "torch": torch.__version__.split("+")[0],
            }
        )
    return out


def table(records: list[dict[str, Any]], label: str) -> str:
    """The markdown table of ``records`` (``label``: the kernels' name, "muDNN")."""
    lines = [
        f"| model | routed calls | {label} | CPU fallback | other | CPU-fallback operators |",
        "|---|---|---|---|---|---|",
    ]
    for r in records:
        ops = ", ".join(
            f"`{op}` {n}" for op, n in sorted(r["fallback_ops"].items(), key=lambda kv: -kv[1])
        )
        other = r["calls"] - r["native"] - r["cpu"]
        lines.append(
            f"| {r['model']} | {r['calls']} | {r['native']} | {r['cpu']} | {other} | {ops or '-'} |"
        )
    return "\n".join(lines)


def write(root: Path, vendor: str, label: str) -> None:
    """Measures the census on the active vendor, writes the monorepo's
    ``docs/data/census/<vendor>.json`` and the table between the markers of ``docs/<vendor>.md``."""
    records = rows(load_zoo(root), vendor)
    doc = root / "docs" / f"{vendor}.md"
    data = root / "docs" / "data" / "census" / f"{vendor}.json"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text(json.dumps({"vendor": vendor, "models": records}, indent=1) + "\n")
    text = doc.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    if not rest:
        raise SystemExit(f"{doc} has no '{BEGIN}' marker")
    doc.write_text(f"{head}{BEGIN}\n{table(records, label)}\n{END}{tail}")
    print(f"wrote {data} and {doc}'s census table")


def documented(root: Path, vendor: str, label: str) -> bool:
    """Whether ``docs/<vendor>.md``'s census table is the one its JSON gives (not edited by hand)."""
    data = json.loads((root / "docs" / "data" / "census" / f"{vendor}.json").read_text())
    doc = (root / "docs" / f"{vendor}.md").read_text()
    return f"{BEGIN}\n{table(data['models'], label)}\n{END}" in doc
