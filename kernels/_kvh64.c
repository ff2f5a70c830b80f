/* kvh64 on the CPU in C: the same bits as kernels/checksum.py (the definition; see there and
 * docs/format.md), without numpy's ~20 whole-array passes or the gather copy of each slot.
 *
 * Built by setup.py as an OPTIONAL extension (kvtrace.kernels._kvh64): an install without a
 * C compiler still works and checksum.py falls back to numpy. The loop has no data-dependent
 * branches and its reduction is a plain sum mod 2**32, so gcc/clang -O3 vectorize it; on
 * x86-64 (Linux) it is also cloned for AVX2 / AVX-512 and the best clone is picked when loaded. The
 * GIL is released while hashing, so the engine's own threads (NIXL progress, transfer
 * workers) keep running while its pages are hashed.
 *
 * hash_ranges(data, offsets, nbytes, out): out[i] = kvh64(data[offsets[i]:offsets[i]+nbytes[i]])
 *   data: any C-contiguous buffer (read only); offsets, nbytes: int64 buffers; out: a
 *   writable uint64 buffer; all three of one length. Every range is bounds-checked first
 *   (ValueError): nothing outside ``data`` is ever read.
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

static int get_buf(PyObject *o, Py_buffer *v, int flags, const char *what, Py_ssize_t itemsize) {
    if (PyObject_GetBuffer(o, v, flags | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (itemsize && (v->itemsize != itemsize || v->len % itemsize)) {
        PyErr_Format(PyExc_TypeError, "hash_ranges: %s must hold %zd-byte integers", what, itemsize);
        PyBuffer_Release(v);
        return -1;
    }
    return 0;
}

static PyObject *hash_ranges(PyObject *self, PyObject *args) {
    PyObject *od, *oo, *on, *out_o;
    if (!PyArg_ParseTuple(args, "OOOO:hash_ranges", &od, &oo, &on, &out_o))
        return NULL;
    Py_buffer d, o, n, r;
    if (get_buf(od, &d, PyBUF_SIMPLE, "data", 0) < 0)
        return NULL;
    if (get_buf(oo, &o, PyBUF_FORMAT, "offsets", 8) < 0) {
        PyBuffer_Release(&d);
        return NULL;
    }
    if (get_buf(on, &n, PyBUF_FORMAT, "nbytes", 8) < 0) {
        PyBuffer_Release(&d);
        PyBuffer_Release(&o);
        return NULL;
    }
    if (get_buf(out_o, &r, PyBUF_WRITABLE | PyBUF_FORMAT, "out", 8) < 0) {
        PyBuffer_Release(&d);
        PyBuffer_Release(&o);
        PyBuffer_Release(&n);
        return NULL;
    }
    PyObject *ret = NULL;
    Py_ssize_t count = o.len / 8;
    const int64_t *off = (const int64_t *)o.buf, *len = (const int64_t *)n.buf;
    uint64_t *res = (uint64_t *)r.buf;
    const uint8_t *base = (const uint8_t *)d.buf;
    uint64_t size = (uint64_t)d.len;
    if (n.len / 8 != count || r.len / 8 != count) {
        PyErr_SetString(PyExc_ValueError, "hash_ranges: offsets, nbytes and out differ in length");
        goto done;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (off[i] < 0 || len[i] < 0 || (uint64_t)off[i] > size || (uint64_t)len[i] > size - (uint64_t)off[i]) {
            PyErr_Format(PyExc_ValueError, "hash_ranges: range [%lld, +%lld) outside the %llu-byte memory given",
                         (long long)off[i], (long long)len[i], (unsigned long long)size);
            goto done;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < count; i++)
        res[i] = kvh64_one(base + off[i], (uint64_t)len[i]);
    Py_END_ALLOW_THREADS
    ret = Py_None;
    Py_INCREF(ret);
done:
    PyBuffer_Release(&d);
    PyBuffer_Release(&o);
    PyBuffer_Release(&n);
    PyBuffer_Release(&r);
    return ret;
}

static PyMethodDef methods[] = {
    {"hash_ranges", hash_ranges, METH_VARARGS,
     "hash_ranges(data, offsets, nbytes, out): out[i] = kvh64 of data[offsets[i]:+nbytes[i]]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kvh64", "kvh64 on the CPU in C (same bits as checksum.py)",
                                    -1, methods};

PyMODINIT_FUNC PyInit__kvh64(void) { return PyModule_Create(&module); }
