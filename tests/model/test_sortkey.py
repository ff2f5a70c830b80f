"""sortkey's packed sort (kvtrace/model/sortkey.py) orders rows as np.lexsort of the same
keys does, rows tied on every key included (every sort in it is stable): keys narrow and as wide as 64 bits, signed ones
from int64's least to its largest, one word or several, ties in the first word rare (a
lexsort of those rows) or many (a lexsort of all)."""
import numpy as np
import pytest

from kvtrace.model import sortkey


def _key(x: np.ndarray) -> sortkey.Key:
    return sortkey.Key.of(int(x.min()), int(x.max()), x.dtype.kind == "i")


def _sorted_by(keys: list[np.ndarray], block: int, tied_share: float) -> np.ndarray:
    packing = sortkey.Packing([_key(k) for k in keys])
    n = len(keys[0])
    words = [np.empty(n, np.uint64) for _ in range(packing.nwords)]
    for s in range(0, n, block):   # filled a block of rows at a time
        packing.fill([w[s:s + block] for w in words], [k[s:s + block] for k in keys])
    old = sortkey.TIED_SHARE
    sortkey.TIED_SHARE = tied_share
    try:
        return sortkey.order(words, n, block=block)
    finally:
        sortkey.TIED_SHARE = old


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("tied_share", [0.25, 1.0, 0.0])
def test_packed_order_is_the_lexsort_order(seed, tied_share):
    r = np.random.default_rng(seed)
    n = 3000
    big = np.array([0, 1, 2**40, 2**63 - 1, 2**63, 2**64 - 1], np.uint64)
    keys = [
        r.integers(0, 3, n).astype(np.int32),                               # 2 bits
        big[r.integers(0, len(big), n)] if seed % 2 else r.integers(0, 1 << 20, n).astype(np.uint64),
        np.array([-2**63, -1, 0, 5, 2**63 - 1], np.int64)[r.integers(0, 5, n)],   # 64 bits
        r.random(n) < .1,                                                   # a null flag
        r.integers(-3, 3, n).astype(np.int64),
        r.integers(0, 2, n).astype(np.int32),
    ][: 2 + seed % 5]
    got = _sorted_by(keys, block=17, tied_share=tied_share)
    want = np.lexsort(keys[::-1])
    assert got.tolist() == want.tolist()   # tied rows too: in their order


def test_constant_keys_take_no_bits():
    packing = sortkey.Packing([_key(np.zeros(5, np.int64)), _key(np.full(5, 7, np.uint64))])
    assert packing.nwords == 0
    assert sortkey.order([], 5).tolist() == [0, 1, 2, 3, 4]
