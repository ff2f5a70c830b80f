"""The batched CPU paths against the reference definitions (checksum.py, provenance.py)."""
import numpy as np
import pytest

from kvtrace.kernels import (checksum_slots, checksum_slots_later, checksum_rows, copy_ranges, decode, decode_pages,
                             fill_page, fill_poison, fill_provenance, kvh64, poison,
                             pool_tag, request_tag)


def test_checksum_slots_match_reference_any_alignment():
    rng = np.random.default_rng(1)
    buf = rng.integers(0, 256, 10_000, dtype=np.uint8)
    offs, ns = [0, 1, 7, 4096, 9000], [0, 5, 1023, 4096, 1000]
    got = checksum_slots(buf, offs, ns)
    assert [int(x) for x in got] == [kvh64(buf[o:o + n]) for o, n in zip(offs, ns)]


def test_checksum_many_regions_and_rows():
    rng = np.random.default_rng(2)
    regs = [rng.integers(0, 256, 512, dtype=np.uint8), rng.integers(0, 256, 300, dtype=np.uint8)]
    got = checksum_slots(regs, [0, 64, 0, 100], 64, regions=[0, 0, 1, 1])
    want = [kvh64(regs[0][:64]), kvh64(regs[0][64:128]), kvh64(regs[1][:64]), kvh64(regs[1][100:164])]
    assert [int(x) for x in got] == want
    rows = rng.integers(0, 2**16, (6, 33), dtype=np.uint16)   # hashed as raw bytes
    assert [int(x) for x in checksum_rows(rows)] == [kvh64(r.tobytes()) for r in rows]


def test_checksum_later_gives_the_same_sums_and_checks_bounds_at_the_call():
    rng = np.random.default_rng(3)
    regs = [rng.integers(0, 256, 512, dtype=np.uint8), rng.integers(0, 256, 300, dtype=np.uint8)]
    later = checksum_slots_later(regs, [0, 64, 0, 236], 64, regions=[0, 0, 1, 1])
    assert np.array_equal(later(), checksum_slots(regs, [0, 64, 0, 236], 64, regions=[0, 0, 1, 1]))
    # a range past its own region (region 1 is 300 bytes) is refused when asked, not when waited for,
    # even though it would fit in region 0
    with pytest.raises(ValueError, match=r"range \[240, 304\) outside the 300-byte memory"):
        checksum_slots_later(regs, [0, 240], 64, regions=[0, 1])


def test_fill_matches_reference_pages_and_poison():
    dst = bytearray(3000)
    fill_provenance(dst, [0, 700, 1401], [700, 701, 64], "req-7", "index_k", 5, [10, 11, 12])
    fill_poison(dst, [2000], 999)
    b = np.frombuffer(dst, np.uint8)
    assert np.array_equal(b[:700], fill_page("req-7", "index_k", 5, 10, 700))
    assert np.array_equal(b[700:1401], fill_page("req-7", "index_k", 5, 11, 701))
    assert np.array_equal(b[2000:2999], poison(999)[0])
    assert not b[1465:2000].any()   # nothing written between pages


def test_fill_accepts_tags_and_per_page_values():
    a, b = np.zeros(1024, np.uint8), np.zeros(1024, np.uint8)
    fill_provenance(a, [0, 512], 512, ["r1", "r2"], "kv", [0, 1], [3, 4])
    fill_provenance(b, [0, 512], 512, [request_tag("r1"), request_tag("r2")], pool_tag("kv"), [0, 1], [3, 4])
    assert np.array_equal(a, b)
    assert np.array_equal(a[512:], fill_page("r2", "kv", 1, 4, 512))


def test_copy_in_order_semantics_with_overlap():
    buf = np.arange(64, dtype=np.uint8)
    ref = buf.copy()
    copy_ranges(buf, buf, [(0, 1, 10), (20, 10, 8)])
    ref[1:11] = ref[0:10].copy()
    ref[10:18] = ref[20:28].copy()
    assert np.array_equal(buf, ref)


def test_decode_pages_names_the_writer():
    dst = np.zeros(4096, np.uint8)
    fill_provenance(dst, [0, 1024], 1024, "r9", "kv", 2, [0, 1])
    out = decode_pages(dst, [0, 1024, 2048], 1024)
    assert out[0] == decode(dst[:1024]) and out[0].kind == "data"
    assert (out[1].request_tag, out[1].layer, out[1].page) == (request_tag("r9"), 2, 1)
    assert out[2].kind == "data" and out[2].agree == 1.0   # zeros decode as request tag 0...
    assert out[2].request_tag == 0 and out[2].request_tag != request_tag("r9")


@pytest.mark.parametrize("bad", [[(0, 0, 65)], [(-1, 0, 4)], [(60, 0, 8)]])
def test_copy_refuses_out_of_bounds(bad):
    with pytest.raises(ValueError, match="outside"):
        copy_ranges(np.zeros(64, np.uint8), np.zeros(64, np.uint8), bad)


@pytest.mark.parametrize("shape", [(0, 0), (1, 0), (3, 1), (5, 7), (2, 4), (17, 4099), (40, 65536), (1, 1 << 18)])
def test_fast_kvh64_equals_the_definition(shape):
    """The cache-blocked kvh64 gives the bits of the definition, for any row width."""
    from kvtrace.kernels.checksum import kvh64_rows, kvh64_rows_reference
    rows = np.random.default_rng(shape[1]).integers(0, 256, shape, dtype=np.uint8)
    assert np.array_equal(kvh64_rows(rows), kvh64_rows_reference(rows))
