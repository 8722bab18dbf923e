"""``python -m torch_fl.routing explain <op>``: why an overload is served where it is."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
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
