"""The native-vendor kit: what every native vendor package shares, written once.

- :mod:`torch_fl.kit.kernel_ops`: the ops-table format of a vendor's kernel generator;
- :mod:`torch_fl.kit.kernel_generator`: the generator driver (torch schemas, the SDK symbol check,
  the generated kernels and ``kernels.json``).

The kit's C++ half (kernel-call helpers) is header-only, in ``include/torch_fl/kit/``.

A vendor's build runs its generator where ``torch_fl`` may not be importable (a source tree) or
must not be imported (importing it starts the device runtime): the generator modules import
nothing from ``torch_fl`` or each other, so a vendor's tools load them with this directory on
``sys.path``.
"""
