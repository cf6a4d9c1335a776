"""A bounded cache of per-word sampling tables, kept across calls.

The exponential mechanisms over the vocabulary (SanText, TEM) draw each
token from a table that depends on its input id only: the distances to
every word turned into the two-stage race's factors
(`tfdptext.substitution.race.two_stage_factors`), about 8 |V| bytes
(245 KiB for MiniLM's 30,522 words). Computing it is most of the cost of a
draw; real text repeats its words (in SST-2's training text the 1,000 most
frequent words are 80% of the tokens), so the tables are kept across
calls, up to `max_bytes` in all, the least recently used evicted first.

The cache never changes what is released: a table is a deterministic
function of the id and the privatizer's fixed settings, and every draw
takes its own fresh uniforms whether its table was cached or computed
(`tests/test_exponential_cache.py` checks that seeded runs give the same
outputs with and without it). It holds no noise and nothing about the
inputs beyond which words were seen recently; it lives in the process that
owns the privatizer (one per Beam worker: the DoFn builds the privatizer
once in `setup`, so the tables outlive bundles).

Example:
>>> cache = TableCache(256 * 2**20)
>>> cache.put(17, (block_factors, inner_factors))
>>> cache.get(17) is not None
True
>>> cache.info()["bytes"] <= 256 * 2**20
True
"""

import collections

from tfdptext.privacy import validation

# The default cap of the exponential privatizers' caches: about 1,000
# MiniLM-sized tables.
DEFAULT_MAX_BYTES = 256 * 2**20


class TableCache:
    """Tables (tuples of numpy arrays) by key, at most `max_bytes` of
    array data, least recently used evicted first.

    Args:
        max_bytes: the cap, an integer >= 0 (0: nothing is kept).
    """

    def __init__(self, max_bytes=DEFAULT_MAX_BYTES):
        self.max_bytes = validation.check_int("cache_bytes", max_bytes,
                                              minimum=0)
        self._entries = collections.OrderedDict()
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def __len__(self):
        return len(self._entries)

    def get(self, key):
        """The table of `key`, or None (counted as a hit or a miss)."""
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return entry[0]

    def put(self, key, table):
        """Keeps `table` (a tuple of arrays) for `key`, evicting the least
        recently used tables until it fits; a table larger than the cap is
        not kept."""
        size = sum(int(array.nbytes) for array in table)
        if size > self.max_bytes:
            return
        if key in self._entries:
            self.bytes -= self._entries.pop(key)[1]
        while self.bytes + size > self.max_bytes:
            _, (_, evicted) = self._entries.popitem(last=False)
            self.bytes -= evicted
            self.evictions += 1
        self._entries[key] = (table, size)
        self.bytes += size

    def clear(self):
        self._entries.clear()
        self.bytes = 0

    def info(self):
        """Counts and sizes: hits, misses, evictions, entries, bytes,
        max_bytes."""
        return {"hits": self.hits, "misses": self.misses,
                "evictions": self.evictions, "entries": len(self._entries),
                "bytes": self.bytes, "max_bytes": self.max_bytes}
