"""AMP contract: ``torch.autocast("flagos")`` applies CUDA's per-op cast policy, and
``torch.amp.GradScaler("flagos")`` skips non-finite steps and grows/backs off its scale as on CUDA.

The policy is CUDA's, as ``ATen/autocast_mode.h`` lists it (and the AMP docs reproduce it):

* ``lower_precision_fp``: eligible inputs are cast to the autocast dtype (fp16 by default);
* ``fp32``: eligible inputs are cast to float32;
* ``fp32_set_opt_dtype`` (softmax, sum, cumsum, ...): the op runs with ``dtype=torch.float32``
  unless the caller passed a ``dtype``;
* ``fp32_append_dtype`` (``norm``): redispatched to the overload with a dtype, float32;
* ``promote``: inputs are cast to the widest eligible input dtype;
* every other op runs in the dtype it was given (with its own type promotion).

"Eligible" means a floating-point flagos tensor that is not float64. Each sampled op is checked
twice: its output dtype against the dtype the policy gives, and its values against CPU running the
same op (autocast off) on inputs cast as the policy casts them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch_fl.conformance import tolerances

pytestmark = [pytest.mark.amp, pytest.mark.usefixtures("flagos")]

DEV = "flagos"
AMP_DTYPES = [torch.float16, torch.bfloat16]


def _id(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")


def values_tol(dtype: torch.dtype, tol=None, exact_kernels: bool = True) -> dict[str, float]:
    """Tolerance for a result computed in dtype; tol is conftest's ``tol`` fixture.

    float16/bfloat16 results computed by two implementations may differ by an ulp or two of that
    dtype (order of accumulation), more where the vendor's kernels are not the CPU's
    (:func:`torch_fl.conformance.tolerances.for_lower_precision`); float32 results use the shared
    per-dtype tolerances."""
    if dtype in (torch.float16, torch.bfloat16):
        return tolerances.for_lower_precision(dtype, cpu_kernels=exact_kernels).kwargs()
    assert tol is not None, f"pass the tol fixture for {dtype}"
    return tol(dtype)


def _vendor_name() -> str:
    import torch_fl

    return str(torch_fl.vendor().name)


@pytest.fixture(params=AMP_DTYPES, ids=_id)
def amp_dtype(request, flagos) -> torch.dtype:
    """A lower-precision dtype the vendor declares for autocast (its declared capability)."""
    dtype = request.param
    supported = flagos.get_amp_supported_dtype()
    if dtype not in supported:
        pytest.skip(
            f"vendor {_vendor_name()!r} does not declare {dtype} for autocast "
            f"(torch.flagos.get_amp_supported_dtype() = {supported})"
        )
    return dtype


# ---------------------------------------------------------------------------------------------
# the policy, op by op
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """One op under one policy. ``op`` is the ATen overload autocast wraps (as the header names
    it), ``make`` builds CPU float32 (or index) arguments from a generator, ``fn`` calls it."""

    op: str
    policy: str
    fn: Callable
    make: Callable[[torch.Generator], tuple]
    name: str = ""

    @property
    def id(self) -> str:
        return self.name or self.op


def _randn(g, *shape):
    return torch.randn(*shape, generator=g)


def _uniform(g, lo, hi, *shape):
    return torch.rand(*shape, generator=g) * (hi - lo) + lo


def _pos(g, *shape):
    return _uniform(g, 0.5, 2.0, *shape)


def _unit(g, *shape):
    return _uniform(g, -0.9, 0.9, *shape)


def _index(g, high, *shape):
    return torch.randint(0, high, shape, generator=g)


LOWER = "lower_precision_fp"
FP32 = "fp32"
SET_OPT = "fp32_set_opt_dtype"
APPEND = "fp32_append_dtype"
PROMOTE = "promote"

CASES = [
    # lower_precision_fp
    Case("mm", LOWER, torch.mm, lambda g: (_randn(g, 8, 16), _randn(g, 16, 8))),
    Case("matmul", LOWER, torch.matmul, lambda g: (_randn(g, 2, 8, 16), _randn(g, 16, 4))),
    Case("bmm", LOWER, torch.bmm, lambda g: (_randn(g, 2, 8, 16), _randn(g, 2, 16, 4))),
    Case(
        "addmm",
        LOWER,
        torch.addmm,
        lambda g: (_randn(g, 8, 4), _randn(g, 8, 16), _randn(g, 16, 4)),
    ),
    Case(
        "baddbmm",
        LOWER,
        torch.baddbmm,
        lambda g: (_randn(g, 2, 8, 4), _randn(g, 2, 8, 16), _randn(g, 2, 16, 4)),
    ),
    Case(
        "addbmm",
        LOWER,
        torch.addbmm,
        lambda g: (_randn(g, 8, 4), _randn(g, 2, 8, 16), _randn(g, 2, 16, 4)),
    ),
    Case("addmv", LOWER, torch.addmv, lambda g: (_randn(g, 8), _randn(g, 8, 16), _randn(g, 16))),
    Case("addr", LOWER, torch.addr, lambda g: (_randn(g, 8, 4), _randn(g, 8), _randn(g, 4))),
    Case("mv", LOWER, torch.mv, lambda g: (_randn(g, 8, 16), _randn(g, 16))),
    Case("linear", LOWER, F.linear, lambda g: (_randn(g, 4, 16), _randn(g, 8, 16), _randn(g, 8))),
    Case(
        "conv1d",
        LOWER,
        F.conv1d,
        lambda g: (_randn(g, 2, 3, 16), _randn(g, 4, 3, 3), _randn(g, 4)),
    ),
    Case(
        "conv2d",
        LOWER,
        lambda x, w, b: F.conv2d(x, w, b, padding=1),
        lambda g: (_randn(g, 2, 3, 8, 8), _randn(g, 4, 3, 3, 3), _randn(g, 4)),
    ),
    Case(
        "conv_transpose2d.input",
        LOWER,
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2),
        lambda g: (_randn(g, 2, 4, 5, 5), _randn(g, 4, 3, 3, 3), _randn(g, 3)),
    ),
    Case("prelu", LOWER, F.prelu, lambda g: (_randn(g, 2, 3, 4), _pos(g, 3))),
    Case(
        "einsum",
        LOWER,
        lambda a, b: torch.einsum("bij,bjk->bik", a, b),
        lambda g: (_randn(g, 2, 8, 16), _randn(g, 2, 16, 4)),
    ),
    Case(
        "linalg_vecdot", LOWER, torch.linalg.vecdot, lambda g: (_randn(g, 4, 16), _randn(g, 4, 16))
    ),
    Case(
        "linalg_multi_dot",
        LOWER,
        lambda a, b, c: torch.linalg.multi_dot([a, b, c]),
        lambda g: (_randn(g, 4, 8), _randn(g, 8, 8), _randn(g, 8, 3)),
    ),
    Case(
        "scaled_dot_product_attention",
        LOWER,
        F.scaled_dot_product_attention,
        lambda g: (_randn(g, 2, 2, 8, 16), _randn(g, 2, 2, 8, 16), _randn(g, 2, 2, 8, 16)),
    ),
    Case(
        "lstm_cell",
        LOWER,
        lambda x, h, c, w_ih, w_hh, b_ih, b_hh: torch.lstm_cell(x, (h, c), w_ih, w_hh, b_ih, b_hh),
        lambda g: (
            _randn(g, 3, 8),
            _randn(g, 3, 4),
            _randn(g, 3, 4),
            _randn(g, 16, 8) / 4,
            _randn(g, 16, 4) / 4,
            _randn(g, 16),
            _randn(g, 16),
        ),
    ),
    # fp32
    Case("acos", FP32, torch.acos, lambda g: (_unit(g, 64),)),
    Case("exp", FP32, torch.exp, lambda g: (_randn(g, 64),)),
    Case("log", FP32, torch.log, lambda g: (_pos(g, 64),)),
    Case("log1p", FP32, torch.log1p, lambda g: (_pos(g, 64),)),
    Case("rsqrt", FP32, torch.rsqrt, lambda g: (_pos(g, 64),)),
    Case("reciprocal", FP32, torch.reciprocal, lambda g: (_pos(g, 64),)),
    Case("sinh", FP32, torch.sinh, lambda g: (_randn(g, 64),)),
    Case("pow.Tensor_Scalar", FP32, lambda x: torch.pow(x, 2.5), lambda g: (_pos(g, 64),)),
    Case("pow.Tensor_Tensor", FP32, torch.pow, lambda g: (_pos(g, 64), _randn(g, 64))),
    Case("pow.Scalar", FP32, lambda x: torch.pow(2.0, x), lambda g: (_randn(g, 64),)),
    Case("softplus", FP32, F.softplus, lambda g: (_randn(g, 64),)),
    Case(
        "layer_norm",
        FP32,
        lambda x, w, b: F.layer_norm(x, (16,), w, b),
        lambda g: (_randn(g, 4, 16), _randn(g, 16), _randn(g, 16)),
    ),
    Case(
        "group_norm",
        FP32,
        lambda x, w, b: F.group_norm(x, 2, w, b),
        lambda g: (_randn(g, 2, 4, 5), _randn(g, 4), _randn(g, 4)),
    ),
    Case(
        "rms_norm",
        FP32,
        lambda x, w: F.rms_norm(x, (16,), w),
        lambda g: (_randn(g, 4, 16), _randn(g, 16)),
    ),
    Case("mse_loss", FP32, F.mse_loss, lambda g: (_randn(g, 8, 5), _randn(g, 8, 5))),
    Case("l1_loss", FP32, F.l1_loss, lambda g: (_randn(g, 8, 5), _randn(g, 8, 5))),
    Case("smooth_l1_loss", FP32, F.smooth_l1_loss, lambda g: (_randn(g, 8, 5), _randn(g, 8, 5))),
    Case(
        "nll_loss",
        FP32,
        F.nll_loss,
        lambda g: (torch.log_softmax(_randn(g, 8, 5), 1), _index(g, 5, 8)),
    ),
    Case(
        "kl_div",
        FP32,
        lambda x, y: F.kl_div(x, y, reduction="batchmean"),
        lambda g: (torch.log_softmax(_randn(g, 8, 5), 1), torch.softmax(_randn(g, 8, 5), 1)),
    ),
    Case(
        "binary_cross_entropy_with_logits",
        FP32,
        F.binary_cross_entropy_with_logits,
        lambda g: (_randn(g, 8, 5), torch.rand(8, 5, generator=g)),
    ),
    Case(
        "cosine_similarity",
        FP32,
        F.cosine_similarity,
        lambda g: (_randn(g, 8, 16), _randn(g, 8, 16)),
    ),
    Case("cdist", FP32, torch.cdist, lambda g: (_randn(g, 6, 4), _randn(g, 5, 4))),
    Case("logsumexp", FP32, lambda x: torch.logsumexp(x, 1), lambda g: (_randn(g, 8, 16),)),
    Case(
        "upsample_bilinear2d",
        FP32,
        lambda x: F.interpolate(x, size=(6, 6), mode="bilinear", align_corners=False),
        lambda g: (_randn(g, 1, 2, 4, 4),),
    ),
    # fp32_set_opt_dtype
    Case("softmax.int", SET_OPT, lambda x: torch.softmax(x, 1), lambda g: (_randn(g, 8, 16),)),
    Case(
        "log_softmax.int", SET_OPT, lambda x: torch.log_softmax(x, 1), lambda g: (_randn(g, 8, 16),)
    ),
    Case("sum", SET_OPT, torch.sum, lambda g: (_randn(g, 8, 16),)),
    Case("sum.dim_IntList", SET_OPT, lambda x: torch.sum(x, 1), lambda g: (_randn(g, 8, 16),)),
    Case("prod", SET_OPT, torch.prod, lambda g: (_uniform(g, 0.9, 1.1, 32),)),
    Case(
        "prod.dim_int",
        SET_OPT,
        lambda x: torch.prod(x, 1),
        lambda g: (_uniform(g, 0.9, 1.1, 4, 16),),
    ),
    Case("cumsum", SET_OPT, lambda x: torch.cumsum(x, 1), lambda g: (_randn(g, 4, 32),)),
    Case(
        "cumprod",
        SET_OPT,
        lambda x: torch.cumprod(x, 1),
        lambda g: (_uniform(g, 0.9, 1.1, 4, 16),),
    ),
    Case("linalg_vector_norm", SET_OPT, torch.linalg.vector_norm, lambda g: (_randn(g, 8, 16),)),
    Case("linalg_matrix_norm", SET_OPT, torch.linalg.matrix_norm, lambda g: (_randn(g, 8, 16),)),
    # fp32_append_dtype (the different-redispatch-signature list: norm)
    Case(
        "norm.Scalar",
        APPEND,
        lambda x: torch.ops.aten.norm.Scalar(x, 2),
        lambda g: (_randn(g, 64),),
    ),
    Case(
        "norm.ScalarOpt_dim",
        APPEND,
        lambda x: torch.ops.aten.norm.ScalarOpt_dim(x, 2, [1], False),
        lambda g: (_randn(g, 8, 16),),
    ),
    # promote
    Case(
        "addcdiv",
        PROMOTE,
        lambda x, a, b: torch.addcdiv(x, a, b, value=0.5),
        lambda g: (_randn(g, 32), _randn(g, 32), _pos(g, 32)),
    ),
    Case(
        "addcmul",
        PROMOTE,
        lambda x, a, b: torch.addcmul(x, a, b, value=0.5),
        lambda g: (_randn(g, 32), _randn(g, 32), _randn(g, 32)),
    ),
    Case("atan2", PROMOTE, torch.atan2, lambda g: (_randn(g, 32), _randn(g, 32))),
    Case(
        "bilinear",
        PROMOTE,
        F.bilinear,
        lambda g: (_randn(g, 4, 5), _randn(g, 4, 6), _randn(g, 3, 5, 6) / 4, _randn(g, 3)),
    ),
    Case(
        "cross",
        PROMOTE,
        lambda a, b: torch.cross(a, b, dim=1),
        lambda g: (_randn(g, 4, 3), _randn(g, 4, 3)),
    ),
    Case("dot", PROMOTE, torch.dot, lambda g: (_randn(g, 16), _randn(g, 16))),
    Case("vdot", PROMOTE, torch.vdot, lambda g: (_randn(g, 16), _randn(g, 16))),
    Case(
        "grid_sampler",
        PROMOTE,
        lambda x, grid: F.grid_sample(x, grid, align_corners=False),
        lambda g: (_randn(g, 1, 2, 5, 5), _unit(g, 1, 4, 4, 2)),
    ),
    Case(
        "index_put",
        PROMOTE,
        lambda x, i, v: torch.index_put(x, (i,), v),
        lambda g: (_randn(g, 8, 4), torch.tensor([1, 6, 3]), _randn(g, 3, 4)),
    ),
    Case(
        "tensordot",
        PROMOTE,
        lambda a, b: torch.tensordot(a, b, dims=2),
        lambda g: (_randn(g, 3, 4, 5), _randn(g, 4, 5, 6)),
    ),
    Case(
        "scatter_add",
        PROMOTE,
        lambda x, i, s: torch.scatter_add(x, 1, i, s),
        lambda g: (_randn(g, 4, 5), _index(g, 5, 4, 3), _randn(g, 4, 3)),
    ),
]

# How the floating inputs of a case are given, per policy. fp32 inputs are what a float32 model
# feeds a lower-precision op; inputs already in the autocast dtype are what a previous
# lower-precision op feeds an fp32 op; "mixed" is the first floating input in the autocast dtype
# and the others float32.
SCENARIOS = {
    LOWER: ["fp32", "mixed"],
    FP32: ["amp"],
    SET_OPT: ["amp", "fp32"],
    APPEND: ["amp"],
    PROMOTE: ["mixed", "amp"],
}


def _is_eligible(t) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != torch.float64


def _map_floats(args, fn):
    """Apply fn(position, tensor) to every floating tensor argument (lists included), in order."""
    position = 0

    def one(a):
        nonlocal position
        if isinstance(a, (list, tuple)):
            return type(a)(one(x) for x in a)
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            out = fn(position, a)
            position += 1
            return out
        return a

    return tuple(one(a) for a in args)


def _given(args, scenario: str, amp: torch.dtype):
    """The CPU arguments as the test hands them to the op under autocast."""

    def cast(position, t):
        if scenario == "amp" or (scenario == "mixed" and position == 0):
            return t.to(amp)
        return t

    return _map_floats(args, cast)


def _float_dtypes(args) -> list[torch.dtype]:
    found: list[torch.dtype] = []
    _map_floats(args, lambda _, t: found.append(t.dtype))
    return found


def policy_dtype(policy: str, input_dtypes: list[torch.dtype], amp: torch.dtype) -> torch.dtype:
    """The dtype CUDA's autocast computes in (and returns) for an op of this policy whose
    floating inputs have these dtypes (all eligible)."""
    if policy == LOWER:
        return amp
    if policy in (FP32, SET_OPT, APPEND):
        return torch.float32
    if policy == PROMOTE:
        return torch.float32 if torch.float32 in input_dtypes else amp
    raise AssertionError(policy)


def _to(args, device):
    def one(a):
        if isinstance(a, (list, tuple)):
            return type(a)(one(x) for x in a)
        return a.to(device) if isinstance(a, torch.Tensor) else a

    return tuple(one(a) for a in args)


def _outputs(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


POLICY_PARAMS = [
    pytest.param(case, scenario, id=f"{case.id}-{scenario}")
    for case in CASES
    for scenario in SCENARIOS[case.policy]
]


@pytest.mark.parametrize(("case", "scenario"), POLICY_PARAMS)
def test_policy(case: Case, scenario: str, amp_dtype: torch.dtype, tol, exact_kernels):
    g = torch.Generator().manual_seed(sum(map(ord, case.id)))
    given = _given(case.make(g), scenario, amp_dtype)
    # The installed torch's lists decide (they change between minors: rms_norm joined the fp32
    # list after 2.11); test_sampled_ops_are_in_cudas_lists pins the newest torch to the table.
    policy = _installed_policy(case)
    if policy is None:
        # Not autocast by this torch at all: the op runs in the dtypes it was given.
        expected = _outputs(case.fn(*given))[0].dtype
    else:
        expected = policy_dtype(policy, _float_dtypes(given), amp_dtype)

    with torch.autocast(DEV, dtype=amp_dtype):
        assert torch.is_autocast_enabled(DEV)
        out = _outputs(case.fn(*_to(given, DEV)))

    # CPU reference: the same op, autocast off, on the inputs cast as the policy casts them.
    reference = _outputs(
        case.fn(*_map_floats(given, lambda _, t: t.to(expected) if _is_eligible(t) else t))
    )
    assert len(out) == len(reference)
    for actual, ref in zip(out, reference, strict=True):
        assert ref.dtype == expected, f"reference computed in {ref.dtype}, policy says {expected}"
        assert actual.device.type == DEV
        assert actual.dtype == expected, (
            f"{case.op} ({policy}) on inputs {_float_dtypes(given)} under "
            f"autocast({_id(amp_dtype)}): got {actual.dtype}, CUDA's policy gives {expected}"
        )
        torch.testing.assert_close(actual.cpu(), ref, **values_tol(expected, tol, exact_kernels))


# The op lists in the installed ATen/autocast_mode.h (what CUDA's autocast registers).
HEADER_LISTS = {
    "AT_FORALL_LOWER_PRECISION_FP": LOWER,
    "AT_FORALL_FP32": FP32,
    "AT_FORALL_FP32_SET_OPT_DTYPE": SET_OPT,
    "AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE": APPEND,
    "AT_FORALL_PROMOTE": PROMOTE,
}


def _header_policies() -> dict[str, str] | None:
    header = Path(torch.__file__).parent / "include" / "ATen" / "autocast_mode.h"
    if not header.exists():
        return None
    text = header.read_text()
    out: dict[str, str] = {}
    for macro, policy in HEADER_LISTS.items():
        m = re.search(rf"#define {macro}\(_\)(.*?)(?:\n\s*\n|\n#)", text, re.S)
        assert m, f"{macro} not found in {header}"
        body = m.group(1)
        if policy == APPEND:
            names = re.findall(r'"([\w.]+)"', body)
        else:
            names = [
                n + ("." + o if o else "") for n, o in re.findall(r"_\((\w+)(?:,\s*(\w+))?\)", body)
            ]
        for n in names:
            out[n] = policy
    return out


@functools.cache
def _cached_header_policies() -> dict[str, str] | None:
    return _header_policies()


def _installed_policy(case: Case) -> str | None:
    policies = _cached_header_policies()
    return case.policy if policies is None else policies.get(case.op)


def test_sampled_ops_are_in_cudas_lists():
    """Each sampled op is in the header list whose policy the test assumes for it."""
    policies = _header_policies()
    if policies is None:
        pytest.skip(f"this torch install ({torch.__file__}) ships no ATen headers")
    newest = tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 13)
    # The table mirrors torch 2.13's lists; an older minor may not list an op yet (rms_norm
    # joined the fp32 list after 2.11; test_policy then expects it unwrapped), but an op it does
    # list must have the table's policy.
    wrong = {
        c.op: (c.policy, policies.get(c.op))
        for c in CASES
        if policies.get(c.op) != c.policy and (newest or policies.get(c.op) is not None)
    }
    assert not wrong, f"op: (assumed, header) = {wrong}"
    per_policy = {p: sum(c.policy == p for c in CASES) for p in HEADER_LISTS.values()}
    assert min(per_policy.values()) >= 2, per_policy


def test_registered_ops_match_cuda():
    """Every op CUDA's autocast wraps is wrapped for flagos too, and nothing else (cuDNN-only ops
    aside): the same lists, so unsampled ops get the policy the sampled ones show."""
    names = torch._C._dispatch_get_all_op_names()

    def wrapped(key: str) -> set[str]:
        return {n for n in names if torch._C._dispatch_has_kernel_for_dispatch_key(n, key)}

    # aten only: extensions register their own AutocastCUDA kernels (torchvision's roi/deform ops
    # upcast to float32 once torchvision is imported) and have none for flagos (docs/device.md).
    cuda = {
        n
        for n in wrapped("AutocastCUDA")
        if n.startswith("aten::")
        and not n.startswith(("aten::cudnn_", "aten::_cudnn_", "aten::miopen_"))
    }
    flagos = {n for n in wrapped("AutocastPrivateUse1") if n.startswith("aten::")}
    assert cuda, "AutocastCUDA has no kernels in this torch build"
    assert sorted(cuda - flagos) == [], "ops CUDA autocasts but flagos does not"
    assert sorted(flagos - cuda) == [], "ops flagos autocasts but CUDA does not"


# ---------------------------------------------------------------------------------------------
# what autocast leaves alone
# ---------------------------------------------------------------------------------------------


def test_float64_is_not_eligible(amp_dtype):
    x = torch.randn(8, 8, dtype=torch.float64, device=DEV)
    with torch.autocast(DEV, dtype=amp_dtype):
        assert torch.mm(x, x).dtype == torch.float64  # lower_precision_fp
        assert torch.exp(x).dtype == torch.float64  # fp32
        assert torch.sum(x).dtype == torch.float64  # fp32_set_opt_dtype
        assert torch.softmax(x, 0).dtype == torch.float64
        assert torch.ops.aten.norm.Scalar(x, 2).dtype == torch.float64  # fp32_append_dtype
        # promote ignores float64 inputs: the widest eligible one is the autocast dtype.
        y = torch.randn(8, dtype=amp_dtype, device=DEV)
        assert torch.dot(y, y).dtype == amp_dtype


def test_integer_inputs_are_not_eligible(amp_dtype):
    i = torch.arange(12, dtype=torch.int32, device=DEV)
    with torch.autocast(DEV, dtype=amp_dtype):
        assert torch.sum(i).dtype == torch.int64
        assert torch.cumsum(i, 0).dtype == torch.int64
        assert torch.cumsum(i, 0).cpu().tolist() == torch.cumsum(i.cpu(), 0).tolist()
        try:
            assert torch.mm(i.view(3, 4), i.view(4, 3)).dtype == torch.int32
        except NotImplementedError as exc:
            # A vendor without integer matmul (CUDA) must refuse it for Int, proving the inputs
            # reached the kernel uncast.
            assert "'Int'" in str(exc), str(exc)


def test_cpu_tensors_are_not_autocast_by_flagos_autocast(amp_dtype):
    x = torch.randn(8, 8)
    with torch.autocast(DEV, dtype=amp_dtype):
        assert not torch.is_autocast_enabled("cpu")
        assert torch.mm(x, x).dtype == torch.float32
        assert torch.exp(x.to(amp_dtype)).dtype == amp_dtype


def test_unlisted_ops_run_in_their_input_dtype(amp_dtype):
    a = torch.randn(16, device=DEV).to(amp_dtype)
    b = torch.randn(16, device=DEV)
    with torch.autocast(DEV, dtype=amp_dtype):
        assert torch.relu(a).dtype == amp_dtype
        assert torch.tanh(a).dtype == amp_dtype
        assert torch.relu(b).dtype == torch.float32
        # Native type promotion, no autocast intervention (cat and stack left the promote list
        # when they learned to promote by themselves).
        assert (a + b).dtype == torch.float32
        assert torch.cat([a, b]).dtype == torch.float32
        assert torch.stack([a, b]).dtype == torch.float32
        torch.testing.assert_close(torch.cat([a, b]).cpu(), torch.cat([a.cpu(), b.cpu()]))


def test_index_copy_is_not_promoted(amp_dtype):
    """index_copy is in no list: mixed dtypes fail as they do on CPU (and on CUDA)."""
    x = torch.zeros(5, 3)
    src = torch.ones(2, 3).to(amp_dtype)
    index = torch.tensor([0, 4])
    with pytest.raises(RuntimeError) as cpu_error:
        x.index_copy(0, index, src)
    with torch.autocast(DEV, dtype=amp_dtype), pytest.raises(RuntimeError) as flagos_error:
        x.to(DEV).index_copy(0, index.to(DEV), src.to(DEV))
    assert "dtype" in str(cpu_error.value) and "dtype" in str(flagos_error.value)


def test_explicit_dtype_argument_is_honoured(amp_dtype):
    """fp32_set_opt_dtype only fills in a dtype the caller did not give."""
    x = torch.randn(8, 16, device=DEV).to(amp_dtype)
    with torch.autocast(DEV, dtype=amp_dtype):
        assert torch.sum(x, dtype=amp_dtype).dtype == amp_dtype
        assert torch.softmax(x, 1, dtype=torch.float64).dtype == torch.float64
        assert torch.cumsum(x, 1, dtype=amp_dtype).dtype == amp_dtype
        assert torch.softmax(x, 1).dtype == torch.float32
    torch.testing.assert_close(
        torch.softmax(x, 1, dtype=torch.float64).cpu(),
        torch.softmax(x.cpu(), 1, dtype=torch.float64),
    )


def test_binary_cross_entropy_is_banned(amp_dtype):
    p = torch.rand(8, device=DEV)
    y = torch.rand(8, device=DEV)
    with (
        torch.autocast(DEV, dtype=amp_dtype),
        pytest.raises(RuntimeError, match="unsafe to autocast"),
    ):
        F.binary_cross_entropy(p, y)
    # Outside autocast it works.
    torch.testing.assert_close(
        F.binary_cross_entropy(p, y).cpu(), F.binary_cross_entropy(p.cpu(), y.cpu())
    )


# ---------------------------------------------------------------------------------------------
# the autocast state
# ---------------------------------------------------------------------------------------------


def test_default_dtype_and_supported_dtypes(flagos):
    assert torch.amp.is_autocast_available(DEV)
    assert torch.get_autocast_dtype(DEV) == torch.float16  # CUDA's default, and PrivateUse1's
    supported = flagos.get_amp_supported_dtype()
    assert isinstance(supported, list) and supported
    assert set(supported) <= {torch.float16, torch.bfloat16}, supported
    assert flagos.is_bf16_supported() == (torch.bfloat16 in supported)


def test_state_inside_and_after(amp_dtype):
    default = torch.get_autocast_dtype(DEV)
    assert not torch.is_autocast_enabled(DEV)
    with torch.autocast(DEV, dtype=amp_dtype):
        assert torch.is_autocast_enabled(DEV)
        assert torch.get_autocast_dtype(DEV) == amp_dtype
        with torch.autocast(DEV, enabled=False):
            assert not torch.is_autocast_enabled(DEV)
            x = torch.randn(4, 4, device=DEV)
            assert torch.mm(x, x).dtype == torch.float32
        assert torch.is_autocast_enabled(DEV)
    assert not torch.is_autocast_enabled(DEV)
    assert torch.get_autocast_dtype(DEV) == default


def test_default_dtype_is_used_without_dtype():
    x = torch.randn(4, 4, device=DEV)
    with torch.autocast(DEV):
        assert torch.mm(x, x).dtype == torch.get_autocast_dtype(DEV) == torch.float16
    with torch.autocast(device_type=DEV):
        assert F.linear(x, x).dtype == torch.float16


def test_decorator_form(amp_dtype):
    @torch.autocast(DEV, dtype=amp_dtype)
    def f(a, b):
        return a @ b

    x = torch.randn(4, 4, device=DEV)
    assert f(x, x).dtype == amp_dtype
    assert (x @ x).dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int8], ids=_id)
def test_unsupported_dtype_warns_and_disables(dtype):
    x = torch.randn(4, 4, device=DEV)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autocast(DEV, dtype=dtype):
            assert not torch.is_autocast_enabled(DEV)
            assert torch.mm(x, x).dtype == torch.float32
            assert torch.exp(x.half()).dtype == torch.float16
    messages = [str(w.message) for w in caught]
    assert any(
        "flagos autocast" in m and "not supported" in m and "Disabling" in m for m in messages
    ), messages
    assert not torch.is_autocast_enabled(DEV)
    assert torch.get_autocast_dtype(DEV) == torch.float16


def test_autocast_backward_gives_fp32_grads(amp_dtype):
    """A float32 model under autocast: forward in the autocast dtype, grads of the float32 leaves
    in float32, equal to CPU doing the same casts by hand."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(8, 16, generator=g)
    w = torch.randn(4, 16, generator=g)
    b = torch.randn(4, generator=g)

    wd = w.to(DEV).requires_grad_()
    bd = b.to(DEV).requires_grad_()
    with torch.autocast(DEV, dtype=amp_dtype):
        hidden = F.linear(x.to(DEV), wd, bd)  # lower precision
        loss = torch.log_softmax(hidden, 1).sum()  # fp32 (set_opt_dtype)
    assert hidden.dtype == amp_dtype and loss.dtype == torch.float32
    loss.backward()
    assert wd.grad.dtype == torch.float32 and bd.grad.dtype == torch.float32

    wc = w.clone().requires_grad_()
    bc = b.clone().requires_grad_()
    hidden_c = F.linear(x.to(amp_dtype), wc.to(amp_dtype), bc.to(amp_dtype))
    loss_c = torch.log_softmax(hidden_c.float(), 1).sum()
    loss_c.backward()
    torch.testing.assert_close(loss.cpu(), loss_c, **values_tol(amp_dtype))
    torch.testing.assert_close(wd.grad.cpu(), wc.grad, **values_tol(amp_dtype))
    torch.testing.assert_close(bd.grad.cpu(), bc.grad, **values_tol(amp_dtype))


@pytest.mark.parametrize("cache_enabled", [True, False], ids=["cache", "no_cache"])
def test_cast_cache_reuses_weight_casts(cache_enabled, amp_dtype):
    """As on CUDA, the lower-precision cast of a float32 leaf that requires grad is cached for
    the autocast region (unless cache_enabled=False): both uses share one cast node."""
    w = torch.randn(8, 8, device=DEV, requires_grad=True)
    x = torch.randn(8, 8, device=DEV)
    with torch.autocast(DEV, dtype=amp_dtype, cache_enabled=cache_enabled):
        a = torch.mm(x, w)
        b = torch.mm(x, w)
    assert a.dtype == b.dtype == amp_dtype
    cast_a = a.grad_fn.next_functions[1][0]
    cast_b = b.grad_fn.next_functions[1][0]
    assert (cast_a is cast_b) == cache_enabled
    (a.float().sum() + b.float().sum()).backward()
    assert w.grad.dtype == torch.float32
    expected = 2 * x.to(amp_dtype).float().t().cpu() @ torch.ones(8, 8)
    torch.testing.assert_close(w.grad.cpu(), expected, **values_tol(amp_dtype))


# ---------------------------------------------------------------------------------------------
# GradScaler kernels
# ---------------------------------------------------------------------------------------------

UNSCALE_OP = "aten::_amp_foreach_non_finite_check_and_unscale_"
UPDATE_OP = "aten::_amp_update_scale_"


def _served_by(counts, op) -> dict[str, int]:
    return dict(counts.get(op, {}))


def _assert_not_cpu_fallback(counts, op):
    from torch_fl import census

    served = _served_by(counts, op)
    assert served, f"{op} was not dispatched to flagos at all: {counts}"
    assert census.FALLBACK not in served, (
        f"{op} ran on the CPU fallback ({served}); GradScaler needs a flagos kernel"
    )


@pytest.mark.parametrize("grad_dtype", [torch.float32, torch.float16], ids=_id)
@pytest.mark.parametrize("poison", ["finite", "inf", "-inf", "nan"])
def test_unscale_kernel(grad_dtype, poison):
    from torch_fl import census

    g = torch.Generator().manual_seed(3)
    grads = [
        torch.randn(5, generator=g).to(grad_dtype),
        torch.randn(4, 6, generator=g).to(grad_dtype).t(),  # non-contiguous
        torch.randn(0).to(grad_dtype),
        torch.randn(1000, generator=g).to(grad_dtype),
    ]
    if poison != "finite":
        grads[3][777] = float(poison)
    inv_scale = torch.tensor([1.0 / 1024])

    cpu_grads = [t.clone() for t in grads]
    cpu_found = torch.zeros(1)
    torch._amp_foreach_non_finite_check_and_unscale_(cpu_grads, cpu_found, inv_scale)

    dev_grads = [t.to(DEV) for t in grads]
    found = torch.zeros(1, device=DEV)
    with census.counting() as counts:
        torch._amp_foreach_non_finite_check_and_unscale_(dev_grads, found, inv_scale.to(DEV))
    _assert_not_cpu_fallback(counts, UNSCALE_OP)

    assert found.item() == (0.0 if poison == "finite" else 1.0)
    assert cpu_found.item() == found.item()
    for actual, expected, given in zip(dev_grads, cpu_grads, grads, strict=True):
        assert actual.dtype == grad_dtype and actual.stride() == given.stride()
        torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0, equal_nan=True)
        if poison == "finite":
            torch.testing.assert_close(actual.cpu(), given / 1024, rtol=0, atol=0)


def test_unscale_kernel_keeps_found_inf_set():
    """found_inf only ever goes to 1: a later finite list does not clear an earlier hit."""
    found = torch.zeros(1, device=DEV)
    inv = torch.ones(1, device=DEV)
    torch._amp_foreach_non_finite_check_and_unscale_(
        [torch.tensor([1.0, float("nan")], device=DEV)], found, inv
    )
    torch._amp_foreach_non_finite_check_and_unscale_([torch.ones(3, device=DEV)], found, inv)
    assert found.item() == 1.0


def _update_reference(scale, tracker, found_inf, growth, backoff, interval):
    """_amp_update_scale_ as CUDA documents it (AmpKernels.cu)."""
    if found_inf:
        return scale * backoff, 0
    successful = tracker + 1
    if successful == interval:
        new_scale = float(torch.tensor(scale, dtype=torch.float32) * growth)  # float32 math
        return (new_scale if math.isfinite(new_scale) else scale), 0
    return scale, successful


UPDATE_CASES = {
    "finite_counts_up": (1024.0, 0, 0.0, 3),
    "finite_reaches_interval": (1024.0, 2, 0.0, 3),
    "inf_backs_off": (1024.0, 2, 1.0, 3),
    "growth_would_overflow": (3.0e38, 2, 0.0, 3),
    "interval_one": (8.0, 0, 0.0, 1),
}


@pytest.mark.parametrize("case", list(UPDATE_CASES))
def test_update_scale_kernel(case):
    from torch_fl import census

    scale0, tracker0, found0, interval = UPDATE_CASES[case]
    growth, backoff = 2.0, 0.5
    expected_scale, expected_tracker = _update_reference(
        scale0, tracker0, found0, growth, backoff, interval
    )

    cpu_scale = torch.tensor([scale0])
    cpu_tracker = torch.tensor([tracker0], dtype=torch.int32)
    torch._amp_update_scale_(
        cpu_scale, cpu_tracker, torch.tensor([found0]), growth, backoff, interval
    )

    scale = torch.tensor([scale0], device=DEV)
    tracker = torch.tensor([tracker0], dtype=torch.int32, device=DEV)
    with census.counting() as counts:
        out = torch._amp_update_scale_(
            scale, tracker, torch.tensor([found0], device=DEV), growth, backoff, interval
        )
    _assert_not_cpu_fallback(counts, UPDATE_OP)
    assert out is scale or out.data_ptr() == scale.data_ptr()
    assert scale.item() == cpu_scale.item() == float(torch.tensor(expected_scale))
    assert tracker.item() == cpu_tracker.item() == expected_tracker


# ---------------------------------------------------------------------------------------------
# GradScaler end to end
# ---------------------------------------------------------------------------------------------


def _setup(init_scale=2.0**10, growth_interval=3, device=DEV):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler(
        DEV,
        init_scale=init_scale,
        growth_factor=2.0,
        backoff_factor=0.5,
        growth_interval=growth_interval,
    )
    return model, opt, scaler


def _step(model, opt, scaler, poison: float | None = None, amp_dtype=torch.float16):
    opt.zero_grad()
    x = torch.ones(2, 4, device=next(model.parameters()).device)
    with torch.autocast(DEV, dtype=amp_dtype):
        loss = model(x).float().pow(2).mean()
    if poison is not None:
        loss = loss * poison
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()


def _params(model):
    return [p.detach().cpu().clone() for p in model.parameters()]


def test_gradscaler_finite_step_matches_unscaled_sgd(amp_dtype):
    model, opt, scaler = _setup()
    ref = torch.nn.Linear(4, 3)
    ref.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)

    _step(model, opt, scaler, amp_dtype=amp_dtype)
    assert scaler.get_scale() == 2.0**10
    assert scaler._growth_tracker.item() == 1
    assert scaler._scale.device.type == DEV

    # CPU: the same step without scaling (the grads the scaler unscaled).
    ref_opt.zero_grad()
    x = torch.ones(2, 4)
    w, b = (p.to(amp_dtype) for p in ref.parameters())
    F.linear(x.to(amp_dtype), w, b).float().pow(2).mean().backward()
    ref_opt.step()
    for actual, expected in zip(_params(model), _params(ref), strict=True):
        torch.testing.assert_close(actual, expected, **values_tol(amp_dtype))


@pytest.mark.parametrize("poison", [float("inf"), float("nan")], ids=["inf", "nan"])
def test_gradscaler_skips_nonfinite_step_and_backs_off(poison):
    model, opt, scaler = _setup()
    _step(model, opt, scaler)  # one good step: momentum buffers exist, tracker at 1
    before = _params(model)
    momentum = [opt.state[p]["momentum_buffer"].cpu().clone() for p in model.parameters()]

    _step(model, opt, scaler, poison=poison)
    for actual, expected in zip(_params(model), before, strict=True):
        assert torch.equal(actual, expected), "a non-finite step must not touch the parameters"
    for p, expected in zip(model.parameters(), momentum, strict=True):
        assert torch.equal(opt.state[p]["momentum_buffer"].cpu(), expected)
    assert scaler.get_scale() == 2.0**9
    assert scaler._growth_tracker.item() == 0

    _step(model, opt, scaler)  # and training resumes
    assert any(not torch.equal(a, b) for a, b in zip(_params(model), before, strict=True))
    assert scaler.get_scale() == 2.0**9


def test_gradscaler_grows_after_growth_interval():
    model, opt, scaler = _setup(growth_interval=3)
    scales = []
    for _ in range(7):
        _step(model, opt, scaler)
        scales.append(scaler.get_scale())
    assert scales == [2.0**10, 2.0**10, 2.0**11, 2.0**11, 2.0**11, 2.0**12, 2.0**12]


def test_gradscaler_first_step_overflow_on_huge_scale():
    """A scale so large that the scaled loss overflows float16 grads: steps are skipped and the
    scale halves until the grads are finite, as on CUDA."""
    model, opt, scaler = _setup(init_scale=2.0**40, growth_interval=1000)
    before = _params(model)
    _step(model, opt, scaler, poison=2.0**100)
    assert scaler.get_scale() == 2.0**39
    assert all(torch.equal(a, b) for a, b in zip(_params(model), before, strict=True))


def test_gradscaler_two_devices(two_devices):
    """Params on two devices: one non-finite grad on the second device skips the whole step."""
    d0, d1 = two_devices
    p0 = torch.nn.Parameter(torch.ones(3, device=d0))
    p1 = torch.nn.Parameter(torch.ones(3, device=d1))
    opt = torch.optim.SGD([p0, p1], lr=0.5)
    scaler = torch.amp.GradScaler(DEV, init_scale=4.0, growth_interval=100)

    def step(poison):
        opt.zero_grad()
        loss = p0.sum() + (p1 * poison).sum().to(d0)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    step(1.0)
    assert p0.detach().cpu().tolist() == [0.5] * 3 and p1.detach().cpu().tolist() == [0.5] * 3
    step(float("inf"))
    assert p0.detach().cpu().tolist() == [0.5] * 3 and p1.detach().cpu().tolist() == [0.5] * 3
    assert scaler.get_scale() == 2.0


def test_gradscaler_state_dict_round_trip():
    model, opt, scaler = _setup()
    _step(model, opt, scaler)
    state = scaler.state_dict()
    assert state["scale"] == 2.0**10 and state["_growth_tracker"] == 1
    other = torch.amp.GradScaler(DEV)
    other.load_state_dict(state)
    assert other.get_scale() == 2.0**10


# ---------------------------------------------------------------------------------------------
# GradScaler bad input
# ---------------------------------------------------------------------------------------------


def test_unscale_kernel_rejects_cpu_grads():
    found = torch.zeros(1, device=DEV)
    inv = torch.ones(1, device=DEV)
    with pytest.raises(RuntimeError, match=r"(?i)device") as info:
        torch._amp_foreach_non_finite_check_and_unscale_([torch.ones(3)], found, inv)
    assert "cpu" in str(info.value) and "flagos" in str(info.value)


def test_unscale_kernel_rejects_cpu_found_inf():
    with pytest.raises(RuntimeError, match=r"(?i)device") as info:
        torch._amp_foreach_non_finite_check_and_unscale_(
            [torch.ones(3, device=DEV)], torch.zeros(1), torch.ones(1, device=DEV)
        )
    assert "cpu" in str(info.value) and "flagos" in str(info.value)


def test_update_scale_kernel_rejects_cpu_tracker():
    with pytest.raises(RuntimeError, match=r"(?i)device") as info:
        torch._amp_update_scale_(
            torch.ones(1, device=DEV),
            torch.zeros(1, dtype=torch.int32),
            torch.zeros(1, device=DEV),
            2.0,
            0.5,
            10,
        )
    assert "cpu" in str(info.value) and "flagos" in str(info.value)


def test_unscale_kernel_rejects_bad_scale_dtype():
    with pytest.raises(RuntimeError, match="inv_scale"):
        torch._amp_foreach_non_finite_check_and_unscale_(
            [torch.ones(3, device=DEV)],
            torch.zeros(1, device=DEV),
            torch.ones(1, device=DEV, dtype=torch.float64),
        )


def test_gradscaler_update_with_cpu_scale_errors():
    model, opt, scaler = _setup()
    _step(model, opt, scaler)
    with pytest.raises(AssertionError, match="new_scale should be a float or a 1-element"):
        scaler.update(torch.tensor(8.0))
    scaler.update(torch.tensor(8.0, device=DEV))
    assert scaler.get_scale() == 8.0


def test_gradscaler_refuses_fp16_params():
    """Unscaling float16 grads is refused with CUDA's message."""
    p = torch.nn.Parameter(torch.ones(3, device=DEV, dtype=torch.float16))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler = torch.amp.GradScaler(DEV)
    scaler.scale(p.float().sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        scaler.step(opt)
