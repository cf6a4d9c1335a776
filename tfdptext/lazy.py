"""Names of a package served from their modules on first use."""

import importlib


def module_getattr(package, names):
    """A module `__getattr__` for `package` that imports `names` ({name:
    submodule}) on first use, so that importing the package does not
    import those submodules (and what they import, e.g. TensorFlow).

    Example:
    >>> __getattr__ = module_getattr(__name__, {"RandomizedResponse":
    ...                                         "randomized_response"})
    """

    def __getattr__(name):
        if name in names:
            module = importlib.import_module(f"{package}.{names[name]}")
            return getattr(module, name)
        raise AttributeError(f"module {package!r} has no attribute "
                             f"{name!r}")

    return __getattr__


def serve(namespace, names, eager):
    """Serves `names` ({name: submodule}) from the package whose globals
    are `namespace`: imported now if `eager` (e.g. under the TensorFlow
    backend, registering Keras classes for loading), else on first use
    (its `__getattr__`)."""
    getter = module_getattr(namespace["__name__"], names)
    namespace["__getattr__"] = getter
    if eager:
        for name in names:
            namespace[name] = getter(name)
