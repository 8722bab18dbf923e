"""``python -m torch_fl``: print what is under the ``flagos`` device."""

from __future__ import annotations

import torch_fl


def main() -> None:
    print(torch_fl.info(), end="")


if __name__ == "__main__":
    main()
