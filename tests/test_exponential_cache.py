"""The offline exponential mechanisms' cross-call cache of per-word
sampling tables (`tfdptext.offline.table_cache`): bounded, and never
changing what is released.

Same-output checks: a seeded privatizer draws its uniforms in token order
before it looks a table up, so two privatizers with the same seed must
release exactly the same ids whatever their caches hold (none, a few
tables with evictions, all of them). Distribution check: draws served
from the warm cache against the closed form (chi-square, p > 1e-4)."""

import numpy as np
import pytest

import substitution_checks as checks
from tfdptext import mechanisms
from tfdptext.errors import ArgumentError
from tfdptext.offline import SanTextCorpusPrivatizer
from tfdptext.offline import TEMCorpusPrivatizer
from tfdptext.offline import table_cache
from tfdptext.privacy.exponential import two_stage_sizes

# A 300-word random table: tables of 304 floats, several chunks of ids.
RNG = np.random.default_rng(3)
TABLE = RNG.standard_normal((300, 6)).astype(np.float32)
SPECIAL = (0, 1)


def _calls():
    """A Zipf-like stream of ids in calls of 1 to 700 tokens (repeats
    within and across calls, more distinct ids than a small cache
    holds)."""
    rng = np.random.default_rng(11)
    ids = np.minimum(rng.zipf(1.3, 6000), 298) + 1
    sizes = [1, 10, 64, 700, 3, 10, 10, 64, 2000, 5]
    calls, start = [], 0
    for size in sizes:
        calls.append(ids[start:start + size])
        start += size
    return calls


@pytest.mark.parametrize("make", [
    lambda **kw: SanTextCorpusPrivatizer(TABLE, 2.0, special_token_ids=SPECIAL,
                                         **kw),
    lambda **kw: TEMCorpusPrivatizer(TABLE, 2.0, gamma=1.5,
                                     special_token_ids=SPECIAL, **kw),
    lambda **kw: SanTextCorpusPrivatizer(
        TABLE, 2.0, sensitive_token_ids=range(150, 300), p=0.4,
        special_token_ids=SPECIAL, **kw),
], ids=["santext", "tem", "santext_plus"])
def test_the_cache_never_changes_the_released_ids(make):
    blocks, size = two_stage_sizes(len(TABLE))
    entry_bytes = 8 * (blocks + blocks * size)  # one word's tables
    caps = (0, 5 * entry_bytes, table_cache.DEFAULT_MAX_BYTES)
    privatizers = [make(seed=5, cache_bytes=cap) for cap in caps]
    for call in _calls():
        outputs = [p(call) for p in privatizers]
        for other in outputs[1:]:
            np.testing.assert_array_equal(outputs[0], other)
    none, small, large = (p.cache_info() for p in privatizers)
    assert none["entries"] == 0 and none["hits"] == 0
    assert small["entries"] <= 5 and small["evictions"] > 0
    assert small["bytes"] <= 5 * entry_bytes
    assert large["hits"] > 0 and large["evictions"] == 0
    # Each distinct id's table was computed once in the large cache.
    assert large["misses"] == large["entries"]


def test_the_cache_is_bounded_and_least_recently_used_goes_first():
    cache = table_cache.TableCache(3 * 800)
    table = (np.zeros(50), np.zeros(50))  # 800 bytes
    for key in (1, 2, 3):
        cache.put(key, table)
    assert cache.get(1) is not None  # 1 is now the most recent
    cache.put(4, table)  # evicts 2, the least recently used
    assert cache.get(2) is None and cache.get(3) is not None
    assert cache.info() == {"hits": 2, "misses": 1, "evictions": 1,
                            "entries": 3, "bytes": 2400, "max_bytes": 2400}
    cache.put(5, (np.zeros(1000),))  # larger than the cap: not kept
    assert cache.get(5) is None and cache.info()["bytes"] == 2400
    with pytest.raises(ArgumentError, match="cache_bytes"):
        table_cache.TableCache(-1)


@pytest.mark.parametrize("name", ["santext", "tem"])
def test_draws_from_a_warm_cache_follow_the_closed_form(name):
    import test_exponential_mechanisms as forms

    settings = mechanisms.Settings(
        forms.EPSILON, mechanisms.get(name).parse_options(
            ["gamma=1.6"] if name == "tem" else []),
        checks.TABLE, checks.SPECIAL, checks.PASSTHROUGH)
    privatizer = mechanisms.get(name).offline(settings)
    word = checks.WORDS[0]
    # 400 calls of 50 tokens: every call after the first hits the cache.
    outputs = np.concatenate([privatizer(np.full(50, word))
                              for _ in range(400)])
    assert privatizer.cache_info()["misses"] == 1
    assert privatizer.cache_info()["hits"] == 399
    counts = np.bincount(outputs, minlength=forms.V)
    assert checks.chi_square_pvalue(counts, forms.FORMS[name](word)) > 1e-4


def test_the_cap_is_a_registry_option():
    entry = mechanisms.get("santext")
    settings = mechanisms.Settings(
        2.0, entry.parse_options(["cache_mib=3"]), TABLE, SPECIAL)
    assert entry.offline(settings).cache_info()["max_bytes"] == 3 * 2**20
    with pytest.raises(ArgumentError, match="cache_mib"):
        entry.parse_options(["cache_mib=-1"])
    # The default: 256 MiB.
    default = entry.offline(mechanisms.Settings(
        2.0, entry.parse_options(), TABLE, SPECIAL))
    assert default.cache_info()["max_bytes"] == 256 * 2**20
