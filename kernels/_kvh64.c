/* kvh64 on the CPU in C: the same bits as kernels/checksum.py (the definition; see there and
 * docs/format.md), without numpy's ~20 whole-array passes or the gather copy of each slot.
 *
 * Built by setup.py as an OPTIONAL extension (kvtrace.kernels._kvh64): an install without a
 * C compiler still works and checksum.py falls back to numpy. The loop has no data-dependent
 * branches and its reduction is a plain sum mod 2**32, so gcc/clang -O3 vectorize it; on
 * x86-64 (Linux) it is also cloned for AVX2 / AVX-512 and the best clone is picked when loaded.
 * Long calls release the GIL, so the engine's own threads (NIXL progress, transfer workers)
 * keep running while its pages are hashed.
 *
 * hash_ranges(data, offsets, nbytes, out[, regions[, release]]):
 *   out[i] = kvh64(data[offsets[i]:offsets[i]+nbytes[i]]), or of data[regions[i]][...] when
 *   data is a sequence of buffers (all layers of a page in one call); release: 1 always gives
 *   the GIL away while hashing (a background hashing thread: the engine's threads run on), 0
 *   never, -1 (default) only for calls of GIL_RELEASE_BYTES or more. The buffers are held
 *   (PyObject_GetBuffer) until the hash is done, GIL or not;
 *   data: C-contiguous buffers (read only); offsets, nbytes, regions: int64 buffers; out: a
 *   writable uint64 buffer; all of one length. Every range is bounds-checked first
 *   (ValueError): nothing outside the memory given is ever read.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define GOLDEN 0x9E3779B1u
#define HI_SALT 0x27D4EB2Fu
#define M1 0x85EBCA6Bu
#define M2 0xC2B2AE35u

static inline uint32_t fmix32(uint32_t h) {
    h ^= h >> 16;
    h *= M1;
    h ^= h >> 13;
    h *= M2;
    return h ^ (h >> 16);
}

static inline uint32_t load_le32(const uint8_t *p) {
    uint32_t w;
    memcpy(&w, p, 4); /* unaligned-safe; compiles to one load */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap32(w);
#endif
    return w;
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(_M_X64)) && defined(__has_attribute)
#if __has_attribute(target_clones) && defined(__linux__)
#define KVH_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef KVH_CLONES
#define KVH_CLONES
#endif

/* kvh64 of n bytes at p: words i < m = n / 4 in the vectorized loop, then the zero-padded
 * tail word (index m) when n is not a multiple of 4. */
KVH_CLONES
static uint64_t kvh64_one(const uint8_t *p, uint64_t n) {
    uint64_t m = n / 4;
    uint32_t lo = 0, hi = 0;
    uint32_t k = 0; /* i * GOLDEN mod 2**32, as an induction variable */
    for (uint64_t i = 0; i < m; i++) {
        uint32_t l = fmix32(load_le32(p + 4 * i) ^ k);
        lo += l;
        hi += fmix32(l + HI_SALT);
        k += GOLDEN;
    }
    uint64_t rest = n - 4 * m;
    if (rest) {
        uint8_t b[4] = {0, 0, 0, 0};
        memcpy(b, p + 4 * m, (size_t)rest);
        uint32_t l = fmix32(load_le32(b) ^ (uint32_t)(m * (uint64_t)GOLDEN));
        lo += l;
        hi += fmix32(l + HI_SALT);
    }
    lo += (uint32_t)n;
    return ((uint64_t)hi << 32) | lo;
}

/* Hold the GIL for calls shorter than about one switch interval (5 ms: ~16 MiB at a few GB/s):
 * a short hash that gave the GIL away would then wait up to a switch interval to get it back
 * from whichever thread took it, which costs more than it lets the others run. */
#define GIL_RELEASE_BYTES (16ull << 20)

static int get_ints(PyObject *o, Py_buffer *v, int writable, const char *what) {
    if (PyObject_GetBuffer(o, v, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (v->itemsize != 8 || v->len % 8) {
        PyErr_Format(PyExc_TypeError, "hash_ranges: %s must hold 8-byte integers", what);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

/* hash_ranges(data, offsets, nbytes, out[, regions[, release]]): data is one buffer, or a
 * sequence of buffers with regions[i] naming the buffer of range i. */
static PyObject *hash_ranges(PyObject *self, PyObject *args) {
    PyObject *od, *oo, *on, *out_o, *oreg = Py_None;
    int release = -1;
    if (!PyArg_ParseTuple(args, "OOOO|Oi:hash_ranges", &od, &oo, &on, &out_o, &oreg, &release))
        return NULL;
    PyObject *seq = NULL, *ret = NULL;
    Py_buffer *bufs = NULL;
    Py_ssize_t nbufs = 0, got = 0;
    Py_buffer o = {0}, n = {0}, r = {0}, g = {0};
    int have_o = 0, have_n = 0, have_r = 0, have_g = 0;
    if (oreg == Py_None) {
        seq = PyTuple_Pack(1, od);
    } else {
        seq = PySequence_Fast(od, "hash_ranges: data must be a sequence of buffers when regions are given");
    }
    if (!seq)
        return NULL;
    nbufs = PySequence_Fast_GET_SIZE(seq);
    bufs = PyMem_Calloc(nbufs ? nbufs : 1, sizeof(Py_buffer));
    if (!bufs) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < nbufs; got++)
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &bufs[got], PyBUF_SIMPLE | PyBUF_C_CONTIGUOUS) < 0)
            goto done;
    if (get_ints(oo, &o, 0, "offsets") < 0)
        goto done;
    have_o = 1;
    if (get_ints(on, &n, 0, "nbytes") < 0)
        goto done;
    have_n = 1;
    if (get_ints(out_o, &r, 1, "out") < 0)
        goto done;
    have_r = 1;
    if (oreg != Py_None) {
        if (get_ints(oreg, &g, 0, "regions") < 0)
            goto done;
        have_g = 1;
    }
    Py_ssize_t count = o.len / 8;
    if (n.len / 8 != count || r.len / 8 != count || (have_g && g.len / 8 != count)) {
        PyErr_SetString(PyExc_ValueError, "hash_ranges: offsets, nbytes, out (and regions) differ in length");
        goto done;
    }
    const int64_t *off = (const int64_t *)o.buf, *len = (const int64_t *)n.buf;
    const int64_t *reg = have_g ? (const int64_t *)g.buf : NULL;
    uint64_t *res = (uint64_t *)r.buf;
    uint64_t total = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t b = reg ? reg[i] : 0;
        if (b < 0 || b >= nbufs) {
            PyErr_Format(PyExc_ValueError, "hash_ranges: region %lld of range %zd is not one of the %zd buffers given",
                         (long long)b, i, nbufs);
            goto done;
        }
        uint64_t size = (uint64_t)bufs[b].len;
        if (off[i] < 0 || len[i] < 0 || (uint64_t)off[i] > size || (uint64_t)len[i] > size - (uint64_t)off[i]) {
            PyErr_Format(PyExc_ValueError, "hash_ranges: range [%lld, +%lld) outside the %llu-byte memory given",
                         (long long)off[i], (long long)len[i], (unsigned long long)size);
            goto done;
        }
        total += (uint64_t)len[i];
    }
    /* from here on no Python object is touched: the loop reads only the held buffers */
    int give = release > 0 || (release < 0 && total >= GIL_RELEASE_BYTES);
    PyThreadState *ts = give ? PyEval_SaveThread() : NULL;
    for (Py_ssize_t i = 0; i < count; i++)
        res[i] = kvh64_one((const uint8_t *)bufs[reg ? reg[i] : 0].buf + off[i], (uint64_t)len[i]);
    if (ts)
        PyEval_RestoreThread(ts);
    ret = Py_None;
    Py_INCREF(ret);
done:
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&bufs[i]);
    PyMem_Free(bufs);
    Py_XDECREF(seq);
    if (have_o)
        PyBuffer_Release(&o);
    if (have_n)
        PyBuffer_Release(&n);
    if (have_r)
        PyBuffer_Release(&r);
    if (have_g)
        PyBuffer_Release(&g);
    return ret;
}

static PyMethodDef methods[] = {
    {"hash_ranges", hash_ranges, METH_VARARGS,
     "hash_ranges(data, offsets, nbytes, out[, regions[, release]]): out[i] = kvh64 of data[offsets[i]:+nbytes[i]] "
     "(data[regions[i]] when data is a sequence of buffers); release: 1 always frees the GIL while hashing, "
     "0 never, -1 (default) for long calls only"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kvh64", "kvh64 on the CPU in C (same bits as checksum.py)",
                                    -1, methods};

PyMODINIT_FUNC PyInit__kvh64(void) { return PyModule_Create(&module); }
