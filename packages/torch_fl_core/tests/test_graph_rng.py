"""The seed and offset a vendor's RNG kernel draws (``torch.ops.torch_fl.philox_inputs``, which
vendor kernels call through ``torch_fl/philox.h``). Outside a capture: host values reserved from
the generator. Inside one: device words the graph rewrites before every replay, so a replay draws
new numbers and the generator advances as the captured calls would have eagerly; a kernel that
can only take host values is refused by name.

Before, a vendor kernel had no way to draw in a capture: every generator op on a library backend
was refused (no native RNG kernel could replay)."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.graphs

DEV = torch.device("flagos", 0)


def philox(increment: int, generator=None, *, device_words: bool = True):
    return torch.ops.torch_fl.philox_inputs(
        DEV, increment, generator, "aten::test_draw", device_words
    )


@pytest.fixture(autouse=True)
def _seat(restore_rng_state):
    assert torch.flagos.graphs.supported()


@pytest.fixture
def restore_rng_state():
    state = torch.flagos.get_rng_state(0)
    yield
    torch.flagos.set_rng_state(state, 0)


def test_outside_a_capture_host_values_advance_the_generator():
    torch.flagos.manual_seed(1234)
    seed, offset, words = philox(10)
    assert (seed, offset, words) == (1234, 0, None)
    # Philox takes 4 values per counter: 10 reserves 12.
    assert philox(3)[:2] == (1234, 12)
    assert philox(0)[:2] == (1234, 16)
    g = torch.Generator("flagos").manual_seed(7)
    assert philox(5, g)[:2] == (7, 0)
    assert philox(1, g)[:2] == (7, 8)
    assert philox(0)[:2] == (1234, 16)  # the default generator was left alone


def test_in_a_capture_the_words_are_rewritten_before_each_replay():
    torch.flagos.manual_seed(99)
    base = philox(0)[1]
    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        s1, o1, w1 = philox(10)
        s2, o2, w2 = philox(5)
        seen = w1 + 0  # a captured kernel reading the words
    assert (o1, o2) == (0, 12)
    assert w1.device == DEV and w1.dtype == torch.int64 and w1.shape == (2,)
    assert w1.data_ptr() == w2.data_ptr()  # one pair of words per generator and capture
    # The capture itself drew nothing.
    assert philox(0)[1] == base
    g.replay()
    assert seen.cpu().tolist() == [99, base]
    g.replay()
    # Each replay reserves the graph's 12 + 8 offsets, as the two calls would eagerly.
    assert seen.cpu().tolist() == [99, base + 20]
    assert philox(0)[1] == base + 40


def test_explicit_generators_get_words_of_their_own():
    a = torch.Generator("flagos").manual_seed(11)
    b = torch.Generator("flagos").manual_seed(22)
    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        wa = philox(4, a)[2]
        wb = philox(4, b)[2]
        seen = torch.stack([wa, wb])
    g.replay()
    assert seen.cpu().tolist() == [[11, 0], [22, 0]]
    g.replay()
    assert seen.cpu().tolist() == [[11, 4], [22, 4]]


def test_a_host_value_kernel_is_refused_by_name_in_a_capture():
    g = torch.flagos.Graph()
    with pytest.raises(RuntimeError, match=r"aten::test_draw.*every replay would repeat"):
        with torch.flagos.graph(g):
            philox(8, device_words=False)
    # Nothing was reserved and the device captures again.
    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        y = torch.ones(4, device=DEV) * 2
    g.replay()
    assert y.cpu().eq(2).all()


def test_a_reset_graph_drops_its_words():
    g = torch.flagos.Graph()
    with torch.flagos.graph(g):
        philox(4)
    g.replay()
    g.reset()
    with torch.flagos.graph(g):
        s, o, w = philox(4)
    assert o == 0  # a fresh capture counts from zero again
