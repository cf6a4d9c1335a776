"""Names of a package served from their modules on first use."""

import importlib


def module_getattr(package, names):
    """A module `__getattr__` for `package` that imports `names` ({name:
    submodule}) on first use, so that importing the package does not
    import those submodules (and what they import, e.g. TensorFlow).

    Example:
    >>> __getattr__ = module_getattr(__name__, {"WordDropout":
    ...                                         "word_dropout"})
    """

    def __getattr__(name):
        if name in names:
            module = importlib.import_module(f"{package}.{names[name]}")
            return getattr(module, name)
        raise AttributeError(f"module {package!r} has no attribute "
                             f"{name!r}")

    return __getattr__
