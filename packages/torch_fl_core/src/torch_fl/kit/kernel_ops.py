"""The ops table of a native vendor's kernel generator: one :class:`Op` per aten operator.

Each entry names an aten operator, the vendor's category routine that serves it (one C++ routine
per category, in the vendor's ``csrc/kernels/``), the aten overloads it serves (functional,
``out=`` and in-place spellings where torch has them, so the in-place forms an optimizer uses
reach the kernel too) and the SDK function. An overload spelled ``"_:X"`` is the in-place operator
``name_`` with overload ``X`` (``"_:"`` alone: no overload). Adding an op is one line in a vendor's
table, if its category exists.
"""

from __future__ import annotations

import dataclasses

#: Every dtype a route rule or an op's ``dtypes`` may name, in the order rules list them.
ALL_DTYPES = (
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "complex64",
    "complex128",
)


def pascal(name: str) -> str:
    """``index_select`` -> ``IndexSelect``, ``_softmax`` -> ``Softmax``."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


def full_name(name: str, overload: str) -> str:
    """``aten::add.Tensor`` (``aten::abs`` for the default overload)."""
    return f"aten::{name}" + (f".{overload}" if overload else "")


@dataclasses.dataclass(frozen=True)
class Op:
    #: aten base name, e.g. "add"
    name: str
    #: the vendor's category routine serving it
    category: str
    #: the aten overloads served ("" = the default overload, "_:X" = in-place ``name_.X``)
    overloads: tuple[str, ...]
    #: the SDK function without the SDK's prefix ("Add" for aclnnAdd); None: pascal(name)
    fn: str | None = None
    #: the SDK header declaring the function, where the SDK has one header per op
    header: str | None = None
    #: torch names of the compute dtypes the SDK kernel serves (others are declined); None: the
    #: category routine decides
    dtypes: tuple[str, ...] | None = None
    #: extra C++ arguments for the category routine (after the SDK function arguments)
    args: str = ""
    #: a measured defect of the SDK function: the op is skipped even when the symbol exists
    broken: str | None = None

    def function(self, prefix: str) -> str:
        """The SDK function's name: ``prefix`` + fn (``aclnnAdd``, ``topsatenIndexSelect``)."""
        return prefix + (self.fn or pascal(self.name))

    def aten_overloads(self) -> list[tuple[str, str]]:
        """(operator name, overload name) pairs, e.g. ("add_", "Tensor")."""
        out = []
        for spelled in self.overloads:
            if spelled.startswith("_:"):
                out.append((f"{self.name}_", spelled[2:]))
            else:
                out.append((self.name, spelled))
        return out
