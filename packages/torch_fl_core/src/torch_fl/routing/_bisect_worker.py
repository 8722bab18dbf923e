"""One run of ``python -m torch_fl.routing bisect``: ``_bisect_worker OUT -- script.py args``.

Runs the workload in this process as the census does, with :func:`torch_fl.routing.bisect_report`
collecting, then saves ``{"exit_code", "values", "counts"}`` to OUT (``torch.save``).
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    out, sep, *target = argv
    assert sep == "--" and target, "usage: _bisect_worker OUT -- script.py [args]"

    import torch

    from torch_fl import census
    from torch_fl.routing import activation, bisect

    # Installing routes (load_routes(), override()) starts the router's counters afresh: keep
    # what the routes being replaced counted. The fallback's counts ("cpu") survive installs.
    kept: census.Counts = {}
    install = activation._install_locked

    def counted_install() -> None:
        for op, per in census.collect().items():
            for backend, n in per.items():
                if backend != census.FALLBACK:
                    kept.setdefault(op, {})[backend] = kept.get(op, {}).get(backend, 0) + n
        install()

    activation._install_locked = counted_install
    bisect._collector = {}
    before = census.collect()
    sys.path.insert(0, "" if target[0] == "-m" else census._script_dir(target[0]))
    code = census._run(target)
    counts = census._delta(census.collect(), before)
    for op, per in kept.items():
        for backend, n in per.items():
            counts.setdefault(op, {})[backend] = counts.get(op, {}).get(backend, 0) + n
    sys.stdout.flush()
    torch.save({"exit_code": code, "values": bisect._collector, "counts": counts}, out)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
