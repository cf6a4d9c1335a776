"""Fills the cache Keras' saving code reads but never fills.

Keras (3.x, `keras.src.saving.saving_lib.get_attr_skipset`) visits every
object it saves or loads (a layer, a metric, the optimizer...) skipping
the attributes of a reference object of its type: a fresh `Layer()`,
`Metric()`, `Optimizer(1.0)`... built and listed with `dir()` at every
visit. It stores the set under one global key ("saving_attr_skipset_*")
and looks it up under another ("saving_attr_skiplist_*"), so the cache
never hits: a tiny split model's weights file costs ~230 reference
objects, most of the file's CPU time. Filling the key that is read makes
every later save and load reuse the same sets (which depend on the type
only), so they write and read the same files.

Keras keeps the cache in its global state: `keras.backend.clear_session`
empties it, and `cache_skipsets` fills it again (a few reference objects,
once).
"""

# The object types that tfdptext's models, metrics and optimizers are
# saved as (saving_lib's `_obj_type()` values).
OBJECT_TYPES = ("Operation", "Layer", "Functional", "Sequential", "Metric",
                "Optimizer", "Loss")


def _key(obj_type):
    """The global-state key `get_attr_skipset` reads."""
    return f"saving_attr_skiplist_{obj_type}"


def cache_skipsets():
    """Makes Keras' saving and loading reuse each type's skip set in this
    thread (until `keras.backend.clear_session`). Returns how many types
    it filled: 0 when they already were, or when this Keras lacks the
    function (nothing changes then).

    Example:
    >>> cache_skipsets()
    7
    >>> cache_skipsets()  # already filled
    0
    """
    try:
        from keras.src.backend.common import global_state
        from keras.src.saving import saving_lib
    except ImportError:
        return 0
    compute = getattr(saving_lib, "get_attr_skipset", None)
    if compute is None:
        return 0
    filled = 0
    for obj_type in OBJECT_TYPES:
        if global_state.get_global_attribute(_key(obj_type)) is None:
            global_state.set_global_attribute(_key(obj_type),
                                              compute(obj_type))
            filled += 1
    return filled
