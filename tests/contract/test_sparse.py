"""Sparse tensors on flagos (COO and CSR) against the same calls on CPU.

ATen writes most sparse kernels once for CPU and CUDA over a sparse tensor's indices and values;
flagos registers those for its sparse keys (generated at build time from the installed torch),
so their indices and values are flagos tensors and the operators they call are routed. Kernels
CPU and CUDA implement separately (``_coalesce``, sparse ``add.out``/``mul.out``, ``addmm`` with a
sparse matrix, the CSR reductions) run where flagos memory is another backend's on that backend's
kernels over aliases of the parts (``box:cuda`` on the cuda vendor, ``box:cpu`` on sim), else
through the sparse CPU fallback: copies to the CPU, the CPU's kernel, the answer copied back
(written arguments in place), counted as CPU fallbacks.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

pytestmark = [pytest.mark.sparse, pytest.mark.usefixtures("flagos")]


def _coo(device: str = "cpu", coalesced: bool = False) -> torch.Tensor:
    # Duplicate (1, 0) entries: coalescing must sum them.
    indices = torch.tensor([[0, 1, 1, 2, 1], [2, 0, 3, 1, 0]])
    values = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    s = torch.sparse_coo_tensor(indices, values, (3, 4), device=device)
    return s.coalesce() if coalesced else s


def _same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.device.type == "flagos", got.device
    assert got.layout == want.layout, (got.layout, want.layout)
    if got.layout == torch.sparse_coo:
        got, want = got.coalesce(), want.coalesce()
        torch.testing.assert_close(got.indices().cpu(), want.indices())
        torch.testing.assert_close(got.values().cpu(), want.values())
    torch.testing.assert_close(got.cpu().to_dense(), want.to_dense())


def test_coo_construction_and_parts():
    s = _coo("flagos")
    assert s.is_sparse and s.device == torch.device("flagos", 0)
    assert s._indices().device.type == "flagos" and s._values().device.type == "flagos"
    assert (s.sparse_dim(), s.dense_dim(), s._nnz(), s.is_coalesced()) == (2, 0, 5, False)
    assert s.shape == (3, 4)
    _same(s, _coo())
    _same(_coo().to("flagos"), _coo())
    torch.testing.assert_close(s.cpu().to_dense(), _coo().to_dense())


def test_coalesce_sums_duplicates():
    got, want = _coo("flagos").coalesce(), _coo().coalesce()
    assert got.is_coalesced() and got._nnz() == want._nnz() == 4
    torch.testing.assert_close(got.indices().cpu(), want.indices())
    torch.testing.assert_close(got.values().cpu(), want.values())


def test_dense_and_sparse_conversions():
    dense = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
    _same(dense.to("flagos").to_sparse(), dense.to_sparse())
    _same(dense.to("flagos").to_sparse(1), dense.to_sparse(1))
    got = _coo("flagos").to_dense()
    assert got.device.type == "flagos" and got.layout == torch.strided
    torch.testing.assert_close(got.cpu(), _coo().to_dense())


@pytest.mark.parametrize("layout", ["coo", "csr", "csc", "bsr", "bsc"])
def test_dense_to_every_sparse_layout_and_back(layout):
    # A dense operator that makes a sparse tensor: where flagos memory is another backend's, that
    # backend's kernel makes it and its parts join flagos; elsewhere the CPU fallback does.
    from torch_fl import _C

    dense = torch.tensor([[1.0, 0, 2, 0], [0, 3, 0, 0], [4, 0, 5, 6], [0, 0, 0, 7]])
    make = {
        "coo": lambda t: t.to_sparse(),
        "csr": lambda t: t.to_sparse_csr(),
        "csc": lambda t: t.to_sparse_csc(),
        "bsr": lambda t: t.to_sparse_bsr((2, 2)),
        "bsc": lambda t: t.to_sparse_bsc((2, 2)),
    }[layout]
    _C.reset_dispatch_counts()
    got, want = make(dense.to("flagos")), make(dense)
    _same(got, want)
    assert got.values().device == got.device
    if _C.layout_backend() != "cpu":
        assert not _C.fallback_counts(), _C.fallback_counts()
    # And back, with autograd through both conversions.
    x = dense.to("flagos").requires_grad_()
    make(x).to_dense().mul(torch.arange(16.0, device="flagos").reshape(4, 4)).sum().backward()
    x_cpu = dense.clone().requires_grad_()
    make(x_cpu).to_dense().mul(torch.arange(16.0).reshape(4, 4)).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), x_cpu.grad)


@pytest.mark.parametrize(
    "name",
    ["add", "sub", "mul", "scale", "dense_plus_sparse", "neg", "abs", "sqrt", "sum", "sum_dim"],
)
def test_operators_match_cpu(name):
    ops = {
        "add": lambda s, d: s + s,
        "sub": lambda s, d: s - s * 2,
        "mul": lambda s, d: s * s,
        "scale": lambda s, d: s * 2.5,
        "dense_plus_sparse": lambda s, d: d + s,
        "neg": lambda s, d: -s,
        "abs": lambda s, d: (-s).abs(),
        "sqrt": lambda s, d: s.coalesce().sqrt(),
        "sum": lambda s, d: torch.sparse.sum(s),
        "sum_dim": lambda s, d: torch.sparse.sum(s, dim=1),
    }
    dense = torch.arange(12.0).reshape(3, 4)
    got = ops[name](_coo("flagos"), dense.to("flagos"))
    want = ops[name](_coo(), dense)
    if got.layout == torch.strided:
        assert got.device.type == "flagos"
        torch.testing.assert_close(got.cpu(), want)
    else:
        _same(got, want)


def test_in_place_and_out_write_the_callers_tensor():
    s, ref = _coo("flagos", coalesced=True), _coo(coalesced=True)
    before = s
    s.add_(_coo("flagos", coalesced=True))
    ref.add_(_coo(coalesced=True))
    assert s is before
    _same(s, ref)
    out, ref_out = _coo("flagos"), _coo()
    result = torch.add(_coo("flagos"), _coo("flagos"), out=out)
    torch.add(_coo(), _coo(), out=ref_out)
    assert result is out
    _same(out, ref_out)
    dense_out = torch.zeros(0, device="flagos")
    torch.add(torch.ones(3, 4, device="flagos"), _coo("flagos"), out=dense_out)
    torch.testing.assert_close(dense_out.cpu(), torch.ones(3, 4) + _coo())


def test_sparse_matmul_and_its_gradients():
    dense = torch.randn(4, 2, generator=torch.Generator().manual_seed(0))
    s = _coo(coalesced=True).requires_grad_()
    d = dense.clone().requires_grad_()
    sf = _coo("flagos", coalesced=True).requires_grad_()
    df = dense.to("flagos").requires_grad_()
    want, got = torch.sparse.mm(s, d), torch.sparse.mm(sf, df)
    assert got.device.type == "flagos"
    torch.testing.assert_close(got.cpu(), want)
    torch.testing.assert_close((sf @ df).cpu(), s.detach() @ d.detach())
    want.square().sum().backward()
    got.square().sum().backward()
    torch.testing.assert_close(df.grad.cpu(), d.grad)
    assert sf.grad.is_sparse and sf.grad.device.type == "flagos"
    _same(sf.grad, s.grad)
    bias = torch.ones(3, 2)
    torch.testing.assert_close(
        torch.sparse.addmm(bias.to("flagos"), sf.detach(), df.detach()).cpu(),
        torch.sparse.addmm(bias, s.detach(), d.detach()),
    )


def test_csr_layout_and_reductions_with_backward():
    dense = torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0], [4.0, 0.0, 5.0]])
    csr, csr_f = dense.to_sparse_csr(), dense.to("flagos").to_sparse_csr()
    assert csr_f.layout == torch.sparse_csr and csr_f.device.type == "flagos"
    torch.testing.assert_close(csr_f.crow_indices().cpu(), csr.crow_indices())
    torch.testing.assert_close(csr_f.col_indices().cpu(), csr.col_indices())
    torch.testing.assert_close(csr_f.to_dense().cpu(), dense)
    other = torch.randn(3, 2, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close((csr_f @ other.to("flagos")).cpu(), csr @ other)
    for reduce in ("sum", "mean", "amax", "amin"):
        o = other.clone().requires_grad_()
        of = other.to("flagos").requires_grad_()
        want = torch.sparse.mm(csr, o, reduce)
        got = torch.sparse.mm(csr_f, of, reduce)
        torch.testing.assert_close(got.cpu(), want, msg=reduce)
        # amax/amin's backward needs the forward's argmax, kept only when a grad is wanted.
        want.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(of.grad.cpu(), o.grad, msg=reduce)


def test_cpu_operand_raises_as_cuda_does():
    with pytest.raises(RuntimeError, match="same device|flagos"):
        _coo("flagos") + _coo()
    with pytest.raises(RuntimeError, match="same device|flagos"):
        torch.sparse.mm(_coo("flagos", coalesced=True), torch.ones(4, 2))


def test_calls_without_a_flagos_kernel_are_counted_where_they_ran():
    from torch_fl import _C

    backend = _C.layout_backend()
    assert backend in ("cpu", "box:cpu", "box:cuda"), backend
    _C.reset_dispatch_counts()
    _coo("flagos").coalesce()
    counts = _C.dispatch_counts().get("aten::_coalesce", {})
    assert counts.get(backend, 0) >= 1, (backend, counts)
    # A CPU fallback is one only where no backend runs on flagos memory.
    fell_back = _C.fallback_counts().get("aten::_coalesce", 0)
    assert (fell_back >= 1) == (backend == "cpu"), (backend, _C.fallback_counts())


def test_boxed_kernels_work_on_the_callers_memory():
    # Where a backend runs on flagos memory, its sparse kernels see the caller's parts without
    # copies, and an out= tensor takes the parts the kernel gave it, on its own device.
    from torch_fl import _C

    if _C.layout_backend() == "cpu":
        pytest.skip("this vendor's memory is no other backend's: sparse kernels run on CPU copies")
    s = _coo("flagos", coalesced=True)
    out = torch.zeros(3, 4, device="flagos").to_sparse()
    _C.reset_dispatch_counts()
    torch.add(s, s, out=out)
    # CUDA leaves the sum uncoalesced (its parts concatenated), CPU merges them.
    assert out.device == s.device and out._values().device == s.device
    _same(out, _coo(coalesced=True) * 2)
    counts = _C.dispatch_counts()
    assert counts.get("aten::add.out", {}).get(_C.layout_backend(), 0) >= 1, counts
    assert not _C.fallback_counts(), _C.fallback_counts()


def test_kernels_inner_loops_on_flagos_match_cpu():
    # ATen's shared sparse kernels call per-device DispatchStubs for their inner loops: flattened
    # COO indices (CSR <-> CSC, a coalesced tensor's check), sparse_mask's intersection. On flagos
    # each runs CPU's on copies and is counted under the stub's name.
    from torch_fl import _C

    dense = torch.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0], [4.0, 0.0, 5.0]])
    _C.reset_dispatch_counts()
    for layout in (torch.sparse_csc, torch.sparse_bsr):
        kw = {"blocksize": (1, 1)} if layout == torch.sparse_bsr else {}
        got = dense.to("flagos").to_sparse_csr().to_sparse(layout=layout, **kw)
        want = dense.to_sparse_csr().to_sparse(layout=layout, **kw)
        assert got.layout == layout and got.device.type == "flagos"
        torch.testing.assert_close(got.to_dense().cpu(), want.to_dense())
    i, v = torch.tensor([[0, 1], [1, 0]]), torch.tensor([1.0, 2.0])
    s = torch.sparse_coo_tensor(
        i.to("flagos"), v.to("flagos"), (2, 2), is_coalesced=True, check_invariants=True
    )
    assert s.is_coalesced()
    with pytest.raises(RuntimeError, match="coalesced"):  # CPU's check, on flagos's indices
        torch.sparse_coo_tensor(
            i.flip(1).to("flagos"), v.to("flagos"), (2, 2), is_coalesced=True, check_invariants=True
        )
    mask = _coo(coalesced=True)
    other = torch.arange(12.0).reshape(3, 4).to_sparse()
    _same(other.to("flagos").sparse_mask(mask.to("flagos")), other.sparse_mask(mask))
    _same(_coo("flagos") * _coo("flagos", coalesced=True), _coo() * _coo(coalesced=True))
    counts = _C.fallback_counts()
    assert counts.get("at::native::flatten_indices_stub", 0) >= 1, counts


def test_kernels_inner_loops_are_logged_as_cpu_fallbacks():
    # FLAGOS_LOG=fallback names every CPU fallback, an inner loop run for a sparse kernel too.
    code = (
        "import torch\n"
        "d = torch.tensor([[1.0, 0.0], [0.0, 2.0]], device='flagos').to_sparse_csr()\n"
        "d.to_sparse(layout=torch.sparse_csc)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
        env={**os.environ, "FLAGOS_LOG": "fallback"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    line = (
        "[flagos fallback] at::native::flatten_indices_stub -> cpu (a sparse kernel's inner loop)"
    )
    assert line in r.stderr.splitlines(), r.stderr[-2000:]


def test_a_sparse_factory_raises_as_cpu_does():
    # CPU has no empty_strided for sparse layouts and says so; flagos says the same (its sparse
    # fallback makes factories on the CPU) instead of dispatching back to itself without end.
    for layout in (torch.sparse_coo, torch.sparse_csr):
        with pytest.raises(NotImplementedError, match="empty_strided"):
            torch.empty_like(torch.zeros(2, 3), layout=layout)
        with pytest.raises(NotImplementedError, match="empty_strided"):
            torch.empty_like(torch.zeros(2, 3, device="flagos"), layout=layout)
        with pytest.raises(NotImplementedError, match="empty_strided"):
            torch.empty_strided((2, 3), (3, 1), layout=layout, device="flagos")
