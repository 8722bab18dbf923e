"""``mode="reduce-overhead"`` on routed graphs: a vendor without code generation whose runtime
records device graphs replays its compiled forward and backward as device graphs.

No vendor here has both (gcu and ascend route their graphs, sim generates C++), so a child process
on sim takes the routed path (scheduling None) and declares ``compile_graphs``: sim's graph seat
then records the routed operators (its host kernels as recorded host work), and the compiled step
must match eager step for step, with the graphs captured once and replayed after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.graphs

CHILD = textwrap.dedent(
    """
    import json, os
    import torch
    import torch_fl
    from torch_fl.compile import choice

    choice.scheduling = lambda: None  # the routed path, as on a vendor without codegen
    torch_fl.vendor().compile_graphs = True
    import torch._inductor.compile_fx  # noqa: F401  (flagos registers with Inductor here)
    from torch_fl.compile import graph_wrapping, routed_graphs

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    eager = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 2))
    eager.load_state_dict(model.state_dict())
    model.to("flagos")

    def loss_of(m, x):
        return m(x).square().mean()

    step = torch.compile(lambda x: loss_of(model, x), mode="reduce-overhead")
    losses = []
    for i in range(5):
        x = torch.randn(4, 8) + i
        loss = step(x.to("flagos"))
        loss.backward()
        ref = loss_of(eager, x)
        ref.backward()
        losses.append((loss.item(), ref.item()))
        for p, q in zip(model.parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-5, atol=1e-6)
            p.grad = None
            q.grad = None
    print(json.dumps({"stats": graph_wrapping.stats(), "routed": routed_graphs.compiled_graphs(),
                      "losses": losses}))
    """
)


def test_reduce_overhead_replays_routed_graphs(tmp_path):
    env = {**os.environ, "FLAGOS_VENDOR": "sim", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=600
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["routed"] >= 1, got
    # The forward and the backward graph: captured once each, then replayed.
    assert got["stats"] == {"captured": 2, "without_graphs": 0}, got
    for loss, ref in got["losses"]:
        assert abs(loss - ref) <= 1e-5 * max(1.0, abs(ref)), got
