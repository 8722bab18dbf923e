"""How every benchmark reports: paired ratios, fixed-width tables and the JSON record."""

from __future__ import annotations

import json
import re
import statistics
import string
from collections.abc import Iterable

# A format spec's precision, sign and type: what a column title (a string) cannot take.
_NUMERIC = re.compile(r"^([^<>=^]?[<>=^])?[+\- ]?#?0?(\d*)[,_]?(\.\d+)?[a-zA-Z%]?$")


def median_ratio(num: Iterable[float], den: Iterable[float]) -> float:
    """The median over pairs of ``num[i] / den[i]``: samples taken side by side, so slow drift
    and other load on the machine cancel within a pair."""
    return statistics.median(a / b for a, b in zip(num, den, strict=True))


def build_sides(sites: list[str]) -> dict[str, str]:
    """The flagos sides of a run: each build site given (a directory put first on a child's
    ``PYTHONPATH``) labelled A, B, ... in order; none given, the installed build as ``flagos``."""
    if not sites:
        return {"flagos": ""}
    return {chr(65 + i): site for i, site in enumerate(sites)}


def _text_spec(spec: str) -> str:
    """``spec`` for a string in the same column: alignment and width only."""
    m = _NUMERIC.match(spec)
    return f"{m.group(1) or ''}{m.group(2)}" if m else spec


class Table:
    """A fixed-width text table. ``fmt`` is one row's format (``"{:<6}{:>11.1f}"``); titles and
    string values take each column's alignment and width without its precision or type, so a
    missing figure can be given as ``"-"`` or ``""``."""

    def __init__(self, fmt: str, *titles: str) -> None:
        self._parts = [(lit, spec) for lit, _, spec, _ in string.Formatter().parse(fmt)]
        self.titles = titles

    def line(self, *values: object) -> str:
        out, it = [], iter(values)
        for lit, spec in self._parts:
            out.append(lit)
            if spec is None:
                continue
            value = next(it)
            out.append(format(value, _text_spec(spec) if isinstance(value, str) else spec))
        return "".join(out)

    def header(self) -> None:
        """Prints the titles and a rule as long as them."""
        head = self.line(*self.titles)
        print(head)
        print("-" * len(head))

    def row(self, *values: object) -> None:
        print(self.line(*values), flush=True)


def write_json(path: str | None, doc: dict) -> None:
    """Writes a benchmark's JSON record when ``--json PATH`` was given, and says where."""
    if not path:
        return
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=2)
    print(f"wrote {path}")


def write_record(
    path: str | None, benchmark: str, env: dict, method: dict | None = None, **results
) -> None:
    """The JSON record every benchmark writes: its name, the machine, the method, the results."""
    doc: dict = {"benchmark": benchmark, "env": env}
    if method is not None:
        doc["method"] = method
    write_json(path, {**doc, **results})
