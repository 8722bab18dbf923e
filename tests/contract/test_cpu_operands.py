"""CPU tensors beside flagos tensors: accepted in exactly the arguments CUDA accepts them in.

CUDA raises "Expected all tensors to be on the same device" for a non-scalar CPU tensor beside
CUDA tensors, except in the arguments some kernels read or move themselves; which those are is
measured on CUDA (``tools/cpu_arguments_probe.py`` -> ``torch_fl/routing/cpu_arguments.json``).
Each case here is accepted (and equal to CPU) where that record lists its argument, and raises
CUDA's error where it does not, whichever backend serves the call.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch_fl.routing import cpu_arguments

pytestmark = [pytest.mark.errors, pytest.mark.usefixtures("flagos")]


def _x(device: str) -> torch.Tensor:
    return torch.arange(12.0).reshape(4, 3).to(device)


def _idx() -> torch.Tensor:
    return torch.tensor([2, 0])


# case -> (overload, argument, call(device of the non-CPU operands, the CPU operand's device))
CASES: dict[str, tuple[str, str, Callable[[str, str], torch.Tensor]]] = {
    "index": ("aten::index.Tensor", "indices", lambda d, c: _x(d)[_idx().to(c)]),
    "index_put_": (
        "aten::index_put_",
        "indices",
        lambda d, c: _x(d).index_put_((_idx().to(c),), torch.ones(3, device=d)),
    ),
    "index_put_ values": (
        "aten::index_put_",
        "values",
        lambda d, c: _x(d).index_put_((_idx().to(d),), torch.ones(2, 3, device=c)),
    ),
    "index_fill_": (
        "aten::index_fill_.int_Scalar",
        "index",
        lambda d, c: _x(d).index_fill_(0, _idx().to(c), -1.0),
    ),
    "index_select": (
        "aten::index_select",
        "index",
        lambda d, c: _x(d).index_select(0, _idx().to(c)),
    ),
    "index_add_": (
        "aten::index_add_",
        "index",
        lambda d, c: _x(d).index_add_(0, _idx().to(c), torch.ones(2, 3, device=d)),
    ),
    "gather": (
        "aten::gather",
        "index",
        lambda d, c: _x(d).gather(1, torch.zeros(4, 1, dtype=torch.long, device=c)),
    ),
    "masked_fill_": (
        "aten::masked_fill_.Scalar",
        "mask",
        lambda d, c: _x(d).masked_fill_(torch.eye(4, 3, dtype=torch.bool, device=c), 7.0),
    ),
    "add": ("aten::add.Tensor", "other", lambda d, c: _x(d) + torch.ones(4, 3, device=c)),
    "slice_scatter": (
        "aten::slice_scatter",
        "src",
        lambda d, c: torch.slice_scatter(_x(d), torch.ones(2, 3, device=c), 0, 0, 2),
    ),
    "diagonal_scatter": (
        "aten::diagonal_scatter",
        "src",
        lambda d, c: torch.diagonal_scatter(_x(d), torch.ones(3, device=c)),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cpu_operand_as_cuda(case):
    overload, argument, call = CASES[case]
    if argument in cpu_arguments.rules().get(overload, []):
        got = call("flagos", "cpu")
        assert got.device.type == "flagos"
        torch.testing.assert_close(got.cpu(), call("cpu", "cpu"))
    else:
        with pytest.raises(RuntimeError, match="same device"):
            call("flagos", "cpu")


def test_scalar_cpu_tensors_are_operands():
    """A 0-dim CPU tensor is a scalar operand everywhere, as on CUDA."""
    got = _x("flagos") * torch.tensor(2.0)
    torch.testing.assert_close(got.cpu(), _x("cpu") * 2)


def test_the_rules_name_real_arguments():
    for overload, names in cpu_arguments.rules().items():
        name, _, overload_name = overload.removeprefix("aten::").partition(".")
        schema = torch._C._get_schema(f"aten::{name}", overload_name)
        known = {a.name for a in schema.arguments}
        assert set(names) <= known, (overload, names, known)
