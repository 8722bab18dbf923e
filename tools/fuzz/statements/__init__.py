"""The statement kinds a program is made of, one module each. ``KINDS`` is the draw of a kind
per statement (views three times as often as one other kind); its order is part of what a seed
means."""

from __future__ import annotations

from . import foreach, indexing, linalg, misc, pointwise, reductions, views

KINDS = [views.view] * 3 + [
    pointwise.unary,
    pointwise.binary,
    pointwise.binary,
    pointwise.ternary,
    reductions.reduction,
    indexing.indexing,
    indexing.indexing,
    misc.misc,
    misc.misc,
    foreach.foreach,
    linalg.linalg,
]
