"""Finding and loading the CANN toolkit at run time.

The toolkit lives outside the wheel (``set_env.sh`` of a CANN install exports
``ASCEND_TOOLKIT_HOME``), so the package's libraries carry no path to it. Before core loads the
runtime library, :func:`load` loads ``libascendcl.so``, ``libnnopbase.so``, ``libopapi.so`` and
``libhccl.so``
(``RTLD_GLOBAL``) from ``$ASCEND_TOOLKIT_HOME/lib64``, else ``$ASCEND_HOME/lib64``, else
``/usr/local/Ascend/ascend-toolkit/latest/lib64``, else the loader path
(:mod:`torch_fl.vendors.sdk`). A missing library raises :class:`SdkNotFoundError` naming it, where
it was looked for and the variable to set. ``load()`` returns core's ``LoadedSdk``; ``loaded()``
is it once loaded, else None.
"""

from __future__ import annotations

from torch_fl_ascend import sdk_info

__all__ = [  # noqa: F822 -- load, loaded, search_dirs, SdkNotFoundError: core's, by __getattr__
    "DEFAULT_HOME",
    "ENV_VARS",
    "LIBRARIES",
    "SPEC",
    "SdkNotFoundError",
    "load",
    "loaded",
    "search_dirs",
]

ENV_VARS = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME")
LIBRARIES = ("libascendcl.so", "libnnopbase.so", "libopapi.so", "libhccl.so")
DEFAULT_HOME = "/usr/local/Ascend/ascend-toolkit/latest"

#: Core's :class:`torch_fl.vendors.sdk.SdkSpec` fields: a plain dict, so that importing this module
#: imports neither torch nor torch_fl (it is imported while torch-fl sets up the device).
SPEC = {
    "product": "CANN toolkit",
    "env_vars": ENV_VARS,
    "default_home": DEFAULT_HOME,
    "libraries": LIBRARIES,
    "lib_dirs": ("lib64", "lib"),
    "built_home_key": "cann_home",
    "emulator": "the CANN emulator",
    "real": "a toolkit",
}


def __getattr__(name: str):
    from torch_fl.vendors.sdk import module_attribute

    return module_attribute(__name__, SPEC, sdk_info, name)
