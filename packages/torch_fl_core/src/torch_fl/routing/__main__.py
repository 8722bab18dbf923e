"""``python -m torch_fl.routing explain <op>``: why an overload is served where it is;
``python -m torch_fl.routing bisect -- script.py args``: which routes change a workload's result."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bisect"]:
        # Its own parser: everything after "--" belongs to the workload.
        from torch_fl.routing.bisect import main as bisect_main

        return bisect_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m torch_fl.routing",
        description="Routing tools for the flagos device (docs/routing.md).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser(
        "explain",
        help="the rule routing an overload, its file:line, preference list and alternatives",
    )
    ex.add_argument("ops", nargs="+", metavar="OP", help="mm, mm.default, aten::mm.out ...")
    sub.add_parser(
        "bisect",
        help="the overloads whose route changes a workload's published results beyond "
        "tolerance, against the CPU reference (bisect -- script.py args; bisect -h)",
    )
    opts = parser.parse_args(argv)

    import torch  # noqa: F401  (autoloads torch_fl: the table is loaded as in any program)

    from torch_fl.routing.explanation import explain

    status = 0
    for i, spelled in enumerate(opts.ops):
        try:
            text = explain(spelled)
        except ValueError as exc:
            print(f"python -m torch_fl.routing explain: {spelled}: {exc}", file=sys.stderr)
            status = 2
            continue
        print(("\n" if i else "") + text, end="")
    return status


if __name__ == "__main__":
    sys.exit(main())
