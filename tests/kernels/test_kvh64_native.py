"""kvh64's C extension (kernels/_kvh64.c) gives the definition's bits, and the numpy fallback
is used, with the same bits, when the extension is absent."""
import json
import os
import shutil
import subprocess
import sys
import sysconfig

import numpy as np
import pytest

from kvtrace.kernels import checksum, checksum_slots
from kvtrace.kernels.checksum import kvh64_ranges, kvh64_rows, kvh64_rows_reference

# widths around every residue mod 4 and mod the vector widths (4, 8, 16 words), and a page
WIDTHS = [0, 1, 2, 3, 4, 5, 6, 7, 31, 32, 33, 63, 64, 65, 127, 129, 1021, 4096, 4099, 65537, 1 << 20]


def _reference(buf, offsets, widths):
    return [int(kvh64_rows_reference(buf[o:o + n][None, :])[0]) for o, n in zip(offsets, widths)]


def _cases(seed: int):
    rng = np.random.default_rng(seed)
    buf = rng.integers(0, 256, (1 << 20) + 4096, dtype=np.uint8)
    widths = WIDTHS + [int(x) for x in rng.integers(0, 9000, 12)]
    offsets = [int(rng.integers(0, len(buf) - n + 1)) for n in widths]   # any alignment
    return buf, offsets, widths


def test_ranges_match_the_definition_any_width_and_alignment():
    buf, offsets, widths = _cases(7)
    got = kvh64_ranges(buf, offsets, widths)
    assert [int(x) for x in got] == _reference(buf, offsets, widths)
    assert [int(x) for x in checksum_slots(buf, offsets, widths)] == _reference(buf, offsets, widths)


@pytest.mark.parametrize("release_gil", [True, False, None])
def test_ranges_same_bits_whether_the_gil_is_given_away_or_not(release_gil):
    """A background hashing thread gives the GIL away for every call (tracer/async_sums.py)."""
    buf, offsets, widths = _cases(11)
    got = kvh64_ranges([buf], offsets, widths, [0] * len(widths), release_gil=release_gil)
    assert [int(x) for x in got] == _reference(buf, offsets, widths)


def test_ranges_over_many_regions_in_one_call():
    """All layers of a page in one call: each range read from the region it names."""
    rng = np.random.default_rng(5)
    regs = [rng.integers(0, 256, k, dtype=np.uint8) for k in (5000, 1234, 70_001)]
    offsets, widths, which = [0, 17, 1230, 3, 70_000, 0], [4096, 1, 4, 65_537, 1, 0], [0, 0, 1, 2, 2, 1]
    want = [int(kvh64_rows_reference(regs[r][o:o + n][None, :])[0]) for o, n, r in zip(offsets, widths, which)]
    assert [int(x) for x in kvh64_ranges(regs, offsets, widths, which)] == want
    with pytest.raises(ValueError, match="outside"):   # a range past the end of the region it names
        kvh64_ranges(regs, [1230], [5], [1])
    with pytest.raises(ValueError):
        kvh64_ranges(regs, [0], [4], [3])


@pytest.mark.parametrize("shape", [(1, 0), (3, 1), (5, 7), (9, 4), (4, 4099), (2, 1 << 17)])
def test_rows_match_the_definition_any_dtype_and_layout(shape):
    rng = np.random.default_rng(shape[1])
    rows = rng.integers(0, 256, shape, dtype=np.uint8)
    assert np.array_equal(kvh64_rows(rows), kvh64_rows_reference(rows))
    wide = rng.integers(0, 2**16, (shape[0], shape[1] + 3), dtype=np.uint16)[:, 1:-2]   # strided rows
    assert np.array_equal(kvh64_rows(wide), kvh64_rows_reference(wide))


def test_same_bits_for_equal_bytes_and_different_bits_for_moved_bytes():
    """A clean twin: the same page at another address hashes the same; one byte moved does not."""
    buf = np.random.default_rng(3).integers(0, 256, 8192, dtype=np.uint8)
    buf[4:6] = (1, 2)
    buf[4096:8192] = buf[0:4096]
    a, b = kvh64_ranges(buf, [0, 4096], 4096)
    assert a == b
    buf[4100:4102] = (2, 1)   # two bytes swapped: same bytes, moved
    assert kvh64_ranges(buf, [4096], 4096)[0] != a


@pytest.mark.parametrize("offset,width", [(-1, 4), (0, 8193), (8190, 3), (4, -1)])
def test_ranges_outside_the_memory_are_refused(offset, width):
    with pytest.raises(ValueError, match="outside"):
        kvh64_ranges(np.zeros(8192, np.uint8), [offset], [width])


_CHILD = """
import json, sys
if sys.argv[1] == "absent":
    sys.modules["kvtrace.kernels._kvh64"] = None   # as on an install built without a compiler
import numpy as np
from kvtrace.kernels import checksum, checksum_slots
buf = np.frombuffer(bytes.fromhex(sys.argv[2]), np.uint8)
offs, widths = json.loads(sys.argv[3])
halves = [buf[:10_000], buf[10_000:]]
print(json.dumps({"native": checksum.NATIVE,
                  "ranges": [int(x) for x in checksum.kvh64_ranges(buf, offs, widths)],
                  "slots": [int(x) for x in checksum_slots(buf, offs, widths)],
                  "regions": [int(x) for x in checksum.kvh64_ranges(halves, [0, 1, 9_000], [4099, 5, 1000],
                                                                    [0, 1, 1])]}))
"""


@pytest.mark.parametrize("how", ["absent", "env"])
def test_numpy_fallback_is_used_and_gives_the_same_bits(how):
    rng = np.random.default_rng(11)
    buf = rng.integers(0, 256, 20_000, dtype=np.uint8)
    widths = [0, 1, 3, 4, 5, 4099, 8192, 10_001]
    offsets = [int(rng.integers(0, len(buf) - n + 1)) for n in widths]
    env = dict(os.environ)
    env.pop("KVTRACE_KVH64", None)
    if how == "env":
        env["KVTRACE_KVH64"] = "numpy"
    p = subprocess.run([sys.executable, "-c", _CHILD, how, buf.tobytes().hex(), json.dumps([offsets, widths])],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["native"] is False
    want = _reference(buf, offsets, widths)
    assert out["ranges"] == want and out["slots"] == want
    assert out["regions"] == _reference(buf, [0, 10_001, 19_000], [4099, 5, 1000])
    assert [int(x) for x in kvh64_ranges(buf, offsets, widths)] == want   # this process's path


def test_extension_is_built_where_a_compiler_is():
    """An install with a C compiler builds _kvh64 (setup.py); a silent build failure would
    make recording several times slower, so it is caught here."""
    if os.environ.get("KVTRACE_KVH64", "").lower() == "numpy":
        pytest.skip("numpy forced by KVTRACE_KVH64")
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
    if not (shutil.which(cc) and headers):
        pytest.skip("no C compiler or Python headers here: the numpy fallback is expected")
    assert checksum.NATIVE, ("kvtrace.kernels._kvh64 is not built: run `pip install -e .` "
                             "(it needs a C compiler) to build it")
