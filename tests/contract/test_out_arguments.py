"""Out= and in-place arguments as CPU (and CUDA) leave them, whichever backend serves the call.

What an out= or in-place call leaves behind besides its values: the math bits a kernel sets on
its output, an output the kernel resized before it failed, one tensor passed for two parameters
(in-place against out=), a CPU tensor written beside flagos operands, new memory under
deterministic algorithms, and copy_'s shape checks. Each case found by differential fuzzing
against CPU; CUDA's behaviour was the same as CPU's on every one checked on an H200.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch_fl

pytestmark = [pytest.mark.outargs, pytest.mark.usefixtures("flagos")]


def _raises(fn):
    try:
        fn()
    except (RuntimeError, NotImplementedError, IndexError) as exc:
        return exc
    return None


@pytest.mark.parametrize("solver", ["linalg.solve", "linalg.lu_solve"])
def test_out_holds_the_answer_when_the_kernel_sets_a_math_bit(solver, tol):
    # For left=False on complex inputs, CPU's and CUDA's kernels write the conjugate into out and
    # set its conj bit; out must read as the answer.
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(3, 3, dtype=torch.complex64, generator=gen) + 3 * torch.eye(3)
    b = torch.randn(2, 3, dtype=torch.complex64, generator=gen)

    def solve(device, out):
        if solver == "linalg.solve":
            return torch.linalg.solve(a.to(device), b.to(device), left=False, out=out)
        lu, piv = torch.linalg.lu_factor(a)
        return torch.linalg.lu_solve(
            lu.to(device), piv.to(device), b.to(device), left=False, out=out
        )

    expected = solve("cpu", None)
    out = torch.zeros(2, 3, dtype=torch.complex64, device="flagos")
    returned = solve("flagos", out)
    assert returned is out
    torch.testing.assert_close(out.cpu(), expected, **tol(torch.complex64))


@pytest.mark.parametrize(
    "name,op,make_out,error",
    [
        # resized by the structured meta function, then no Long kernel
        (
            "lerp.Scalar_out",
            lambda d, out: torch.lerp(
                torch.tensor([1, 2], device=d), torch.tensor([3, 4], device=d), 0.5, out=out
            ),
            lambda d: torch.zeros(0, dtype=torch.int64, device=d),
            NotImplementedError,
        ),
        # out= the input, resized to the index's shape, then the overlap check
        (
            "gather.out",
            None,
            None,
            RuntimeError,
        ),
    ],
    ids=["lerp-long", "gather-out-self"],
)
@pytest.mark.parametrize("route", ["box", "cpu"])
def test_out_resized_before_an_error_stays_resized(name, op, make_out, error, route, request):
    # On a box:<key> backend the kernel runs on the flagos memory itself; the CPU fallback runs it
    # on host copies, and what the kernel changed before raising must reach the flagos tensor.
    backend = request.getfixturevalue("box_backend") if route == "box" else "cpu"

    def run(device):
        if name == "gather.out":
            out = torch.arange(6.0, device=device).view(2, 3)
            call = lambda: torch.gather(  # noqa: E731
                out, 1, torch.zeros(2, 0, dtype=torch.long, device=device), out=out
            )
        else:
            out = make_out(device)
            call = lambda: op(device, out)  # noqa: E731
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the resize warning
            with pytest.raises(error):
                call()
        return out

    expected = run("cpu")
    with torch_fl.routing.override({name: backend}):
        got = run("flagos")
    assert got.shape == expected.shape, (
        f"{name}: CPU leaves the out tensor {tuple(expected.shape)}, flagos "
        f"{tuple(got.shape)} ({backend})"
    )


@pytest.mark.parametrize(
    "self_shape", [(1, 3), (3,), (2, 3)], ids=["wrong-rows", "one-dim", "right-shape"]
)
def test_addr_in_place_checks_self_as_cpu(self_shape, bits):
    # addr_ calls addr_out(self, self, ...): in place, self keeps its shape or the call fails.
    def run(device):
        a = torch.ones(self_shape, device=device)
        v1, v2 = torch.arange(1.0, 3.0, device=device), torch.arange(1.0, 4.0, device=device)
        return a, _raises(lambda: a.addr_(v1, v2, alpha=2))

    cpu, cpu_err = run("cpu")
    got, err = run("flagos")
    if cpu_err is not None:
        assert err is not None and str(err) == str(cpu_err), (cpu_err, err)
    else:
        assert err is None, err
    assert got.shape == cpu.shape
    bits.equal(got.cpu(), cpu)


@pytest.mark.parametrize(
    "call",
    [
        lambda f, c: torch.add(f, 1, out=c),
        lambda f, c: torch.neg(f[0], out=c),
        lambda f, c: c.add_(f[0]),
        lambda f, c: torch.sum(f, 0, out=c),
    ],
    ids=["add-out", "neg-out", "add_", "sum-out"],
)
def test_written_cpu_tensor_beside_flagos_operands_raises(call):
    # A 0-dim CPU tensor is a scalar operand; written, it would be a CPU output of a device
    # computation, which CUDA refuses ("Expected all tensors to be on the same device").
    f = torch.ones(3, device="flagos")
    c = torch.tensor(5.0)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        call(f, c)
    assert c.item() == 5.0


MODE_INPUTS = {
    "1d": [3.0, 1.0, 1.0, 2.0],
    "2d": [[1.0, 2.0, 2.0], [3.0, 3.0, 1.0]],
    "0d": 5.0,
}


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("rank", sorted(MODE_INPUTS))
def test_mode_out_computes_and_resizes_as_cpu(rank, keepdim, bits):
    x = torch.tensor(MODE_INPUTS[rank])

    def run(device):
        v, i = torch.zeros(7, device=device), torch.zeros(3, dtype=torch.long, device=device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            returned = torch.mode(x.to(device), 0, keepdim=keepdim, out=(v, i))
        assert returned[0] is v and returned[1] is i
        return v, i, [str(w.message).split("(Triggered")[0] for w in caught]

    cpu_v, cpu_i, cpu_warned = run("cpu")
    v, i, warned = run("flagos")
    assert v.shape == cpu_v.shape and v.stride() == cpu_v.stride()
    bits.equal(v.cpu(), cpu_v)
    bits.equal(i.cpu(), cpu_i)
    assert warned == cpu_warned  # the resize warning names the shape CPU's names
    with pytest.raises(RuntimeError, match="expected scalar type 'Long' but got 'Float'"):
        torch.mode(x.to("flagos"), 0, out=(v, torch.empty(0, device="flagos")))


@pytest.mark.parametrize(
    "dst_shape,src_shape", [((0,), (3,)), ((3,), (4,)), ((3,), (2, 3))], ids=str
)
def test_copy_shape_errors_as_cpu(dst_shape, src_shape):
    cpu_err = _raises(lambda: torch.zeros(dst_shape).copy_(torch.ones(src_shape)))
    assert cpu_err is not None
    for src_device in ("flagos", "cpu"):
        dst = torch.zeros(dst_shape, device="flagos")
        err = _raises(lambda: dst.copy_(torch.ones(src_shape, device=src_device)))  # noqa: B023
        assert err is not None and str(err) == str(cpu_err), (src_device, cpu_err, err)


def test_foreach_copy_of_the_same_view_is_a_no_op(bits):
    # copy_ returns before its overlap checks when source and destination are the same data,
    # even for an expanded (internally overlapping) destination.
    def run(device):
        b = torch.tensor([1.0, 2.0], device=device)
        v = b[:1].expand(3)
        torch._foreach_copy_([v.detach()], [v])
        v.detach().copy_(v)
        return b

    bits.equal(run("flagos").cpu(), run("cpu"))


def test_deterministic_algorithms_fill_new_memory():
    # CPU and CUDA fill what empty*/resize_ hand out with NaN (integers: their maximum) under
    # use_deterministic_algorithms(True) and fill_uninitialized_memory (its default).
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        stale = torch.full((64,), 7.0, device="flagos")
        del stale  # its block goes back to the cache, holding sevens
        a = torch.empty(4, device="flagos")
        b = torch.empty_strided((2, 2), (1, 2), device="flagos")
        c = torch.zeros(2, device="flagos")
        c.resize_(4)
        d = torch.empty(2, dtype=torch.int64, device="flagos")
        assert torch.isnan(a.cpu()).all()
        assert torch.isnan(b.cpu()).all()
        assert c.cpu()[:2].eq(0).all() and torch.isnan(c.cpu()[2:]).all()
        assert d.cpu().eq(torch.iinfo(torch.int64).max).all()
    finally:
        torch.use_deterministic_algorithms(was)


def test_cpu_fallback_sees_one_memory_for_one_tensor_twice(bits):
    # The same tensor as the written argument and an input: CPU raises where it refuses any
    # overlap and reads what it writes otherwise; the CPU fallback must do the same.
    def scatter(d):
        x = torch.arange(4.0, device=d)
        return x, _raises(lambda: x.scatter_(0, torch.tensor([1, 0, 3, 2], device=d), x))

    def addmm(d):
        a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=d)
        return a, _raises(lambda: a.addmm_(a, a))

    with torch_fl.routing.override({"scatter_.src": "cpu", "addmm_": "cpu"}):
        for program in (scatter, addmm):
            cpu, cpu_err = program("cpu")
            got, err = program("flagos")
            assert (err is None) == (cpu_err is None), (program.__name__, cpu_err, err)
            if err is not None:
                assert str(err).splitlines()[0] == str(cpu_err).splitlines()[0]
            bits.equal(got.cpu(), cpu)


def _f(*shape, dtype=torch.float32):
    return lambda d: torch.arange(1, 1 + math.prod(shape), dtype=dtype, device=d).reshape(shape)


# out= of another dtype than the result's: some operators cast into it (TensorIterator's
# elementwise ops, sum and cumsum without dtype=), most raise (structured reductions, matmuls,
# softmax, sort/topk, where, gelu, index_select). Each case: the call, given inputs on a device and
# the out= tensor(s).
_X = _f(2, 3)
_XI = _f(2, 3, dtype=torch.int32)
_OUT_DTYPE_CASES = {
    "sum out=f64": lambda d, o: torch.sum(_X(d), 1, out=o(2, torch.float64)),
    "sum dtype=f16 out=f32": lambda d, o: torch.sum(_X(d), 1, dtype=torch.half, out=o(2)),
    "sum dtype=i32 out=i64": lambda d, o: torch.sum(
        _XI(d), 1, dtype=torch.int32, out=o(2, torch.int64)
    ),
    "mean out=f64": lambda d, o: torch.mean(_X(d), 1, out=o(2, torch.float64)),
    "mean dtype=f16 out=f32": lambda d, o: torch.mean(_X(d), 1, dtype=torch.half, out=o(2)),
    "cumsum out=f64": lambda d, o: torch.cumsum(_X(d)[0], 0, out=o(3, torch.float64)),
    "cumsum dtype=f16 out=f32": lambda d, o: torch.cumsum(_X(d)[0], 0, dtype=torch.half, out=o(3)),
    "amax out=f64": lambda d, o: torch.amax(_X(d), 1, out=o(2, torch.float64)),
    "amin int32 out=i64": lambda d, o: torch.amin(_XI(d), 1, out=o(2, torch.int64)),
    "argmax out=i32": lambda d, o: torch.argmax(_X(d), 1, out=o(2, torch.int32)),
    "max.dim out=f64": lambda d, o: torch.max(
        _X(d), 1, out=(o(2, torch.float64), o(2, torch.int64))
    ),
    "vector_norm out=f64": lambda d, o: torch.linalg.vector_norm(
        _X(d), 2, 1, out=o(2, torch.float64)
    ),
    "softmax out=f64": lambda d, o: torch._softmax(_X(d), 1, False, out=o((2, 3), torch.float64)),
    "log_softmax out=f64": lambda d, o: torch._log_softmax(
        _X(d), 1, False, out=o((2, 3), torch.float64)
    ),
    "mm out=f64": lambda d, o: torch.mm(_X(d), _X(d).t(), out=o((2, 2), torch.float64)),
    "addmm out=f64": lambda d, o: torch.addmm(
        _X(d)[:, :2], _X(d), _X(d).t(), out=o((2, 2), torch.float64)
    ),
    "gelu out=f64": lambda d, o: torch._C._nn.gelu(_X(d), out=o((2, 3), torch.float64)),
    "where out=f64": lambda d, o: torch.where(
        _X(d) > 2, _X(d), _X(d), out=o((2, 3), torch.float64)
    ),
    "index_select out=f64": lambda d, o: torch.index_select(
        _X(d), 0, torch.tensor([1], device=d), out=o((1, 3), torch.float64)
    ),
    "sort out=f64": lambda d, o: torch.sort(
        _X(d), 1, out=(o((2, 3), torch.float64), o((2, 3), torch.int64))
    ),
    "any out=f32": lambda d, o: torch.any(_X(d), 1, out=o(2)),
    "sqrt out=f64": lambda d, o: torch.sqrt(_X(d), out=o((2, 3), torch.float64)),
    "add out=i64": lambda d, o: torch.add(_X(d), _X(d), out=o((2, 3), torch.int64)),
    "eq out=f32": lambda d, o: torch.eq(_X(d), _X(d), out=o((2, 3))),
    "cat out=f64": lambda d, o: torch.cat([_X(d), _X(d)], out=o((4, 3), torch.float64)),
}


@pytest.mark.parametrize("case", sorted(_OUT_DTYPE_CASES))
def test_out_of_another_dtype_casts_or_raises_as_native(case, native_device):
    def call(device):
        def out(shape, dtype=torch.float32):
            return torch.empty(shape, dtype=dtype, device=device)

        try:
            result = _OUT_DTYPE_CASES[case](device, out)
        except RuntimeError as exc:
            return exc
        return [t.cpu() for t in (result if isinstance(result, tuple) else (result,))]

    expected, got = call(native_device), call("flagos")
    if isinstance(expected, Exception):
        assert isinstance(got, Exception), f"{case}: {native_device} raises, flagos returned {got}"
        assert str(got).splitlines()[0] == str(expected).splitlines()[0]
        return
    assert not isinstance(got, Exception), f"{case}: flagos raised {got}"
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e)
