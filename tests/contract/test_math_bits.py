"""Math bits: lazy ``conj()`` and ``_neg_view()`` tensors through operators, bit-exact with CPU.

A conjugate or negative view only sets a bit on the tensor; the bytes are unchanged. PyTorch's
``Conjugate`` and ``Negative`` fallbacks materialise the bit before most operators, but some
(``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``dot``, ``vdot``, ``linalg_solve_triangular``, ``clone``,
``copy_``) receive the bits themselves, and in-place operators on a lazy view write back through
it. Each case here runs the same operator on CPU and on ``flagos`` and requires the same bytes
(rtol = atol = 0) and the same writes into mutated inputs; results of core's own clone/copy keep
the conj/neg bits CPU's keep.

Every case runs twice: with the vendor's own route table (``box:cpu`` kernels on alias views on
``sim``) and with every routed overload forced to the CPU fallback (``_C.router_install`` with each
route's backend replaced by ``cpu``; the vendor's routes are reinstalled afterwards). The census
checks that each run went where it says (and, where the vendor declares ``no_cpu_fallback``, that
its routes never fall back). Copies of lazy views in every direction are
``test_copy.py``'s.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable, Iterator

import pytest
import torch
import torch.nn.functional as F

pytestmark = [pytest.mark.mathbits, pytest.mark.usefixtures("flagos")]

ROUTE_MODES = ["vendor_routes", "cpu_fallback"]


def _vendor_name() -> str:
    import torch_fl

    return str(torch_fl.vendor().name)


def _no_cpu_fallback() -> bool:
    """Whether the vendor declares that its routes never reach the CPU fallback."""
    import torch_fl

    return bool(torch_fl.vendor().no_cpu_fallback)


# ---------------------------------------------------------------------------------------------
# lazy views and inputs
# ---------------------------------------------------------------------------------------------

# name -> (dtype, lazy view)
LAZY = {
    "conj-c64": (torch.complex64, torch.conj),
    "conj-c128": (torch.complex128, torch.conj),
    "neg-f32": (torch.float32, torch._neg_view),
    "neg-f64": (torch.float64, torch._neg_view),
    "neg-c64": (torch.complex64, torch._neg_view),
    "conj_neg-c128": (torch.complex128, lambda t: torch._neg_view(t.conj())),
}


def make_inputs(dtype: torch.dtype, seed: int) -> dict[str, torch.Tensor]:
    """CPU inputs: a (4, 5), b (5, 3), c (4, 5), and vectors u, v (5,) with their own storage.

    Operands of BLAS level-1 kernels get their own (aligned) storage: MKL's complex dot on CPU is
    itself not bit-stable across operand alignments, and the CPU fallback copies operands into
    fresh (aligned) buffers.
    """
    g = torch.Generator().manual_seed(seed)
    out = {
        "a": torch.randn(4, 5, generator=g, dtype=dtype),
        "b": torch.randn(5, 3, generator=g, dtype=dtype),
        "c": torch.randn(4, 5, generator=g, dtype=dtype),
        "u": torch.randn(5, generator=g, dtype=dtype),
        "v": torch.randn(5, generator=g, dtype=dtype),
    }
    # A well-conditioned upper-triangular system for solve_triangular.
    out["tri"] = torch.randn(4, 4, generator=g, dtype=dtype).triu() + 4 * torch.eye(4, dtype=dtype)
    return out


def _mutated(op: Callable[[torch.Tensor], object], base: torch.Tensor) -> torch.Tensor:
    """Run an in-place ``op`` on (a lazy view of) a clone of ``base``; the clone is the result."""
    target = base.clone()
    op(target)
    return target


def _idx(t: torch.Tensor, values) -> torch.Tensor:
    return torch.tensor(values, device=t.device)


# name -> (fn(L, x) -> tensor, complex_only). L is the lazy view, x the inputs on one device.
# In-place cases return the mutated base tensor, so what was written through the lazy view is
# what gets compared.
OPS: dict[str, tuple[Callable, bool]] = {
    # clone / contiguous / resolution (served natively by core; listed for completeness)
    "clone": (lambda L, x: L(x["a"]).clone(), False),
    "clone_strided": (lambda L, x: L(x["a"]).t().clone(), False),
    "contiguous": (lambda L, x: L(x["a"]).t().contiguous(), False),
    "resolve": (lambda L, x: L(x["a"]).resolve_conj().resolve_neg(), False),
    "reshape_copy": (lambda L, x: L(x["a"]).t().reshape(-1), False),
    "conj_physical": (lambda L, x: L(x["a"]).conj_physical(), True),
    "view_as_real_resolved": (lambda L, x: torch.view_as_real(L(x["a"]).resolve_conj()), True),
    # matmul family: these receive the conj bit themselves
    "mm_lhs": (lambda L, x: L(x["a"]) @ x["b"], False),
    "mm_rhs": (lambda L, x: x["a"] @ L(x["b"]), False),
    "mm_both": (lambda L, x: L(x["a"]) @ L(x["b"]), False),
    "mm_transposed": (lambda L, x: L(x["a"]).mT @ L(x["c"]), False),
    "mm_out_lazy": (
        lambda L, x: _mutated(
            lambda o: torch.mm(x["a"], x["b"], out=L(o)), torch.zeros_like(x["a"][:, :3])
        ),
        False,
    ),
    "addmm": (lambda L, x: torch.addmm(L(x["c"][:, :3]), L(x["a"]), x["b"]), False),
    "addmm_inplace_lazy_self": (
        lambda L, x: _mutated(lambda o: L(o).addmm_(x["a"], L(x["b"])), x["c"][:, :3]),
        False,
    ),
    "bmm": (
        lambda L, x: torch.bmm(L(x["a"]).expand(2, 4, 5), L(x["b"]).expand(2, 5, 3)),
        False,
    ),
    "baddbmm": (
        lambda L, x: torch.baddbmm(
            L(x["c"][:, :3]).expand(2, 4, 3), L(x["a"]).expand(2, 4, 5), x["b"].expand(2, 5, 3)
        ),
        False,
    ),
    "matmul_batched": (lambda L, x: torch.matmul(L(x["a"]).expand(3, 4, 5), L(x["b"])), False),
    "mv": (lambda L, x: torch.mv(L(x["a"]), L(x["u"])), False),
    "dot_lhs": (lambda L, x: torch.dot(L(x["u"]), x["v"]), False),
    "dot_both": (lambda L, x: torch.dot(L(x["u"]), L(x["v"])), False),
    "vdot": (lambda L, x: torch.vdot(L(x["u"]), x["v"]), False),
    "linear": (lambda L, x: F.linear(L(x["a"]), L(x["c"]), L(x["u"][:4])), False),
    "einsum": (lambda L, x: torch.einsum("ij,jk->ik", L(x["a"]), L(x["b"])), False),
    "solve_triangular": (
        lambda L, x: torch.linalg.solve_triangular(L(x["tri"]), L(x["b"][:4]), upper=True),
        False,
    ),
    # pointwise
    "add": (lambda L, x: L(x["a"]) + x["c"], False),
    "add_both_lazy": (lambda L, x: L(x["a"]) + L(x["c"]), False),
    "sub_strided": (lambda L, x: x["c"].t() - L(x["a"]).t(), False),
    "mul_scalar": (lambda L, x: L(x["a"]) * 3, False),
    "div": (lambda L, x: L(x["a"]) / x["c"], False),
    "neg": (lambda L, x: L(x["a"]).neg(), False),
    "exp": (lambda L, x: L(x["a"]).exp(), False),
    "abs": (lambda L, x: L(x["a"]).abs(), False),
    "eq": (lambda L, x: L(x["a"]) == x["a"], False),
    "where": (
        lambda L, x: torch.where(_idx(x["a"], [1, 0, 1, 0, 1]).bool(), L(x["a"]), x["c"]),
        False,
    ),
    "real_imag": (lambda L, x: torch.stack([L(x["a"]).real, L(x["a"]).imag]), True),
    "angle": (lambda L, x: L(x["a"]).angle(), True),
    # reductions and scans
    "sum_dim": (lambda L, x: L(x["a"]).sum(1), False),
    "sum_all": (lambda L, x: L(x["a"]).sum(), False),
    "mean": (lambda L, x: L(x["a"]).mean(0), False),
    "prod": (lambda L, x: L(x["a"]).prod(0), False),
    "cumsum": (lambda L, x: L(x["a"]).cumsum(1), False),
    "vector_norm": (lambda L, x: torch.linalg.vector_norm(L(x["a"])), False),
    # indexing, joining, reordering
    "cat": (lambda L, x: torch.cat([L(x["a"]), x["c"], L(x["c"])]), False),
    "stack": (lambda L, x: torch.stack([L(x["a"]), x["c"]]), False),
    "index_select": (lambda L, x: L(x["a"]).index_select(1, _idx(x["a"], [4, 0, 2])), False),
    "gather": (lambda L, x: L(x["a"]).gather(1, _idx(x["a"], [[1, 0]] * 4)), False),
    "flip": (lambda L, x: L(x["a"]).flip(0), False),
    "roll": (lambda L, x: L(x["a"]).roll(2, 1), False),
    "masked_select": (lambda L, x: L(x["a"]).masked_select(x["a"].real > 0), False),
    # in-place through a lazy view (the base is returned)
    "add_": (lambda L, x: _mutated(lambda o: L(o).add_(x["a"]), x["c"]), False),
    "mul_": (lambda L, x: _mutated(lambda o: L(o).mul_(L(x["a"])), x["c"]), False),
    "add_strided_": (lambda L, x: _mutated(lambda o: L(o).t().add_(x["a"].t()), x["c"]), False),
    "copy_": (lambda L, x: _mutated(lambda o: L(o)[1:].copy_(x["a"][1:]), x["c"]), False),
    "fill_": (lambda L, x: _mutated(lambda o: L(o[1:3]).fill_(2), x["c"]), False),
    "zero_": (lambda L, x: _mutated(lambda o: L(o[:, ::2]).zero_(), x["c"]), False),
    "index_put_": (
        lambda L, x: _mutated(
            lambda o: L(o).index_put_((_idx(o, [0, 2]),), x["a"][1]),
            x["c"],
        ),
        False,
    ),
    "masked_fill_": (
        lambda L, x: _mutated(lambda o: L(o).masked_fill_(x["a"].real > 0, 1), x["c"]),
        False,
    ),
    "neg_": (lambda L, x: _mutated(lambda o: L(o).neg_(), x["c"]), False),
    "conj_physical_": (lambda L, x: _mutated(lambda o: L(o).conj_physical_(), x["c"]), True),
}

#: BLAS-backed operators: bit-exact only when they see the caller's operands in place.
BLAS_OPS = frozenset(
    {"mm", "matmul", "addmm", "bmm", "baddbmm", "mv", "dot", "vdot", "linear", "einsum", "inner"}
)

#: Operators core serves itself (never routed): their results keep CPU's conj/neg bits exactly.
CORE_OPS = frozenset({"clone", "clone_strided", "contiguous", "resolve", "reshape_copy"})


CASES = [
    pytest.param(lazy, op, id=f"{lazy}-{op}")
    for lazy, (dtype, _) in LAZY.items()
    for op, (_, complex_only) in OPS.items()
    if dtype.is_complex or not complex_only
]


# ---------------------------------------------------------------------------------------------
# route modes
# ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def all_routes_to_cpu() -> Iterator[None]:
    """Every routed overload served by the CPU fallback; the installed routes come back after."""
    from torch_fl import _C

    before = _C.router_routes()
    forced = [(op, "cpu", [(dtypes, "cpu") for dtypes, _ in rules]) for op, _, rules in before]
    _C.router_install(forced)
    try:
        yield
    finally:
        _C.router_install(before)
        assert _C.router_routes() == before, "the vendor's routes were not restored"


@pytest.fixture(scope="module", params=ROUTE_MODES)
def route_mode(request) -> Iterator[str]:
    """The route table a test runs under; module-scoped (pytest groups the tests by mode), so
    the tables are swapped twice per run rather than around every test."""
    from torch_fl import _C

    if not hasattr(_C, "router_install"):
        pytest.skip(f"this torch_fl build has no router (vendor {_vendor_name()!r})")
    if request.param == "cpu_fallback":
        with all_routes_to_cpu():
            yield request.param
    else:
        yield request.param


def _route_backends() -> dict[str, set[str]]:
    """op -> the backends its installed route may serve it with (any dtype)."""
    from torch_fl import _C

    return {op: {backend, *(b for _, b in rules)} for op, backend, rules in _C.router_routes()}


def check_census(counts: dict[str, dict[str, int]], mode: str) -> None:
    """Every counted call went where the installed routes say (unrouted ops: the CPU fallback)."""
    from torch_fl.census import FALLBACK

    if mode == "cpu_fallback":
        elsewhere = {op: per for op, per in counts.items() if set(per) - {FALLBACK}}
        assert not elsewhere, f"with every route forced to cpu, these ran elsewhere: {elsewhere}"
        return
    routes = _route_backends()
    for op, per in counts.items():
        allowed = routes.get(op, {FALLBACK})
        assert set(per) <= allowed, f"{op} served by {sorted(per)}; its route allows {allowed}"
    if _no_cpu_fallback():
        fallback = {op: per for op, per in counts.items() if FALLBACK in per}
        assert not fallback, (
            f"CPU fallback on {_vendor_name()!r} (declares no_cpu_fallback) for math-bit operands: "
            f"{fallback}"
        )


# ---------------------------------------------------------------------------------------------
# the contract
# ---------------------------------------------------------------------------------------------


def _result_list(out) -> list[torch.Tensor]:
    return list(out) if isinstance(out, tuple | list) else [out]


@pytest.mark.parametrize(("lazy", "op"), CASES)
def test_lazy_view_through_op_bit_exact(lazy, op, route_mode, bits, exact_kernels, tol):
    from torch_fl import census

    dtype, view = LAZY[lazy]
    fn, _ = OPS[op]
    x = make_inputs(dtype, seed=zlib.crc32(f"{lazy}/{op}".encode()))
    fx = {k: v.to("flagos") for k, v in x.items()}
    for k in x:
        assert view(fx[k]).is_conj() == view(x[k]).is_conj()
        assert view(fx[k]).is_neg() == view(x[k]).is_neg()

    try:
        expected = fn(view, x)
    except RuntimeError as exc:
        # CPU refuses this combination: flagos must refuse it too, with the same message.
        with pytest.raises(RuntimeError) as err:
            fn(view, fx)
        assert str(err.value) == str(exc)
        return

    with census.counting() as counts:
        got = fn(view, fx)

    for i, (g, e) in enumerate(zip(_result_list(got), _result_list(expected), strict=True)):
        where = f"{lazy} {op} result {i} ({route_mode})"
        assert g.device.type == "flagos", f"{where}: on {g.device}"
        if op in CORE_OPS:
            # Core's own clone/copy keep the bits exactly as CPU does. Computed results may carry
            # a lazy bit or not (CPU's dot(conj(u), conj(v)) returns a conj view of dot(u, v);
            # a kernel that materialises it is as right): for those only the values count.
            assert (g.is_conj(), g.is_neg()) == (e.is_conj(), e.is_neg()), (
                f"{where}: conj/neg bits {(g.is_conj(), g.is_neg())}, "
                f"CPU has {(e.is_conj(), e.is_neg())}"
            )
        if route_mode == "cpu_fallback" and op.split("_")[0] in BLAS_OPS:
            # The fallback copies operands into fresh buffers, and MKL's complex GEMM/GEMV
            # results depend on operand alignment in the last bit (CPU against itself too), so
            # these compare to the last few ulps; the routed (zero-copy) mode stays bit-exact.
            eps = torch.finfo(g.dtype).eps if g.is_floating_point() or g.is_complex() else 0
            torch.testing.assert_close(
                g.cpu().resolve_conj().resolve_neg(),
                e.resolve_conj().resolve_neg(),
                rtol=8 * eps,
                atol=8 * eps,
                msg=lambda m, where=where: f"{where}: {m}",
            )
            continue
        native = _native_backends(counts)
        if (native or not exact_kernels) and op not in CORE_OPS:
            # A vendor's own kernels (gcu's topsaten, CUDA's behind box:cuda) and copies that
            # resolve lazy bits on the device do not round like the CPU's: the lazy bits must
            # still be resolved exactly right, the values agree within the dtype's tolerance.
            torch.testing.assert_close(
                g.cpu().resolve_conj().resolve_neg(),
                e.resolve_conj().resolve_neg(),
                **tol(e.dtype),
                msg=lambda m, where=where, native=native: f"{where} (served by {native}): {m}",
            )
            continue
        try:
            bits.equal(g, e)
        except AssertionError as exc:
            raise AssertionError(f"{where}: {exc}") from None
    # Inputs are untouched (in-place cases mutate their own clones only).
    for k in x:
        bits.equal(fx[k], x[k])
    check_census(counts, route_mode)


def _native_backends(counts) -> list[str]:
    """Backends in ``counts`` that run a vendor's own kernels (not ATen's CPU code)."""
    from torch_fl.census import FALLBACK

    return sorted(
        {
            b
            for per in counts.values()
            for b in per
            if b != FALLBACK and b != "none" and not b.startswith("box:")
        }
    )


def test_fallback_mode_reaches_the_fallback(route_mode):
    """The two modes are different routes (else the parametrisation above would be vacuous)."""
    from torch_fl import census
    from torch_fl.census import FALLBACK

    a = torch.randn(4, 5, dtype=torch.complex64).to("flagos")
    with census.counting() as counts:
        (a.conj() @ a.mT).exp()
    served = {b for per in counts.values() for b in per}
    assert served, "nothing was counted for mm and exp"
    if route_mode == "cpu_fallback":
        assert served == {FALLBACK}
        return
    routes = _route_backends()
    for op, per in counts.items():
        assert set(per) <= routes.get(op, {FALLBACK}), (op, per, routes.get(op))
    if _no_cpu_fallback():
        assert FALLBACK not in served, f"{_vendor_name()!r} declares no_cpu_fallback: {counts}"


@pytest.mark.multidevice
@pytest.mark.parametrize("lazy", ["conj-c64", "neg-f32", "conj_neg-c128"])
def test_lazy_views_on_second_device(lazy, two_devices, bits, flagos):
    dtype, view = LAZY[lazy]
    x = make_inputs(dtype, seed=3)
    fx = {k: v.to("flagos:1") for k, v in x.items()}
    results = {
        "mm": (view(fx["a"]) @ view(fx["b"]), view(x["a"]) @ view(x["b"])),
        "addmm_": (
            _mutated(lambda o: view(o).addmm_(fx["a"], fx["b"]), fx["c"][:, :3]),
            _mutated(lambda o: view(o).addmm_(x["a"], x["b"]), x["c"][:, :3]),
        ),
        "clone": (view(fx["a"]).clone(), view(x["a"]).clone()),
        "add_": (
            _mutated(lambda o: view(o).add_(fx["a"]), fx["c"]),
            _mutated(lambda o: view(o).add_(x["a"]), x["c"]),
        ),
        "to_device0": (view(fx["a"]).to("flagos:0"), view(x["a"])),
    }
    assert flagos.current_device() == 0
    for name, (got, expected) in results.items():
        assert got.device == (torch.device("flagos", 0 if name == "to_device0" else 1)), name
        bits.equal(got, expected)


def test_conj_view_aliases_flagos_storage(flagos):
    """conj()/_neg_view() of a flagos tensor are views: writes through the base show up."""
    base = torch.zeros(3, dtype=torch.complex64, device="flagos")
    c = base.conj()
    n = torch._neg_view(base)
    assert c.is_conj() and n.is_neg()
    assert c.data_ptr() == base.data_ptr() == n.data_ptr()
    base.copy_(torch.tensor([1 + 2j, 3 - 1j, -2j]))
    assert c.resolve_conj().cpu().tolist() == [1 - 2j, 3 + 1j, 2j]
    assert n.resolve_neg().cpu().tolist() == [-1 - 2j, -3 + 1j, 2j]
