/* The recorder's buffered event rows to Arrow in one C pass (kvtrace.tracer._rows).
 *
 * Built by setup.py as an OPTIONAL extension: an install without a C compiler still works and
 * tracer/rows.py falls back to pyarrow's own conversion of the row tuples (same rows, slower);
 * KVTRACE_ROWS=python selects the fallback in a process that has the extension.
 *
 * columns(rows, spec) -> (address, capsule) | None
 *   rows: a list of tuples, one per event, each with len(spec) items; spec: bytes, one letter
 *   per column: 'q' int64, 'i' int32, 'Q' uint64, 's' utf8 string, 'b' binary, 'l' list<int64>,
 *   'L' list<uint64>. None is a null in every column. The result is the address of an Arrow C
 *   data interface ArrowArray (a struct array, one child per column; buffers of exactly the
 *   size pyarrow's own conversion gives them, a validity bitmap only in columns with nulls),
 *   for pa.RecordBatch._import_from_c(address, schema); the capsule frees the struct itself
 *   (and what it holds, if it was never imported). None: some value is not one this pass
 *   converts exactly as pyarrow does (a str subclass, a numpy integer, an int out of range, a
 *   numpy array of slots, ...): the caller converts those rows with pyarrow instead, which
 *   also gives its usual error for values that cannot be converted at all.
 *
 * pick(rows, kind_col, kinds, cols, seq_fn) -> (idx, [column lists], slot lists)
 *   The ring's liveness bookkeeping's selection (ring_store.RingStore._ingest_events): the
 *   positions of the rows whose item kind_col is in the set ``kinds``, each column of
 *   ``cols`` (a tuple of item positions) of those rows as a list, and the slots item (the
 *   last of ``cols``) of those rows as given when a tuple, list or None, else seq_fn(item).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

typedef struct {
    void *bufs[3];
} priv_t;

static void release_array(struct ArrowArray *a) {
    if (a->release == NULL)
        return;
    for (int64_t i = 0; i < a->n_children; i++) {
        struct ArrowArray *c = a->children[i];
        if (c != NULL) {
            if (c->release != NULL)
                c->release(c);
            free(c);
        }
    }
    free(a->children);
    priv_t *p = (priv_t *)a->private_data;
    if (p != NULL) {
        for (int i = 0; i < 3; i++)
            free(p->bufs[i]);
        free(p);
    }
    free((void *)a->buffers);
    a->release = NULL;
}

/* a growable byte buffer */
typedef struct {
    char *p;
    size_t len, cap;
} buf_t;

static int buf_reserve(buf_t *b, size_t more) {
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

/* one column being built */
typedef struct {
    char type;
    uint8_t *valid;    /* bitmap, (n + 7) / 8 bytes, all ones at first */
    int64_t nulls;
    buf_t data;        /* fixed-width values, or string bytes, or list child values */
    int32_t *offsets;  /* strings and lists: n + 1 */
    int64_t child_len; /* lists: values so far */
} col_t;

#define UNSUPPORTED 1  /* a value this pass does not convert: fall back to pyarrow */

static void col_free(col_t *c) {
    free(c->valid);
    free(c->data.p);
    free(c->offsets);
}

static inline void set_null(col_t *c, Py_ssize_t i) {
    c->valid[i >> 3] &= (uint8_t)~(1u << (i & 7));
    c->nulls++;
}

/* exact ints only (pyarrow raises for bool, converts numpy integers and integral floats:
   those go to the fallback, which does exactly what pyarrow does) */
static int get_i64(PyObject *o, int64_t *out) {
    if (!PyLong_CheckExact(o))
        return UNSUPPORTED;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return UNSUPPORTED;
    }
    *out = (int64_t)v;
    return 0;
}

static int get_u64(PyObject *o, uint64_t *out) {
    if (!PyLong_CheckExact(o))
        return UNSUPPORTED;
    unsigned long long v = PyLong_AsUnsignedLongLong(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return UNSUPPORTED;
    }
    *out = (uint64_t)v;
    return 0;
}

static int put_bytes(col_t *c, Py_ssize_t i, const char *s, Py_ssize_t n) {
    if ((size_t)n > (size_t)INT32_MAX - c->data.len)
        return UNSUPPORTED; /* past int32 offsets: pyarrow's business */
    if (buf_reserve(&c->data, (size_t)n) < 0)
        return -1;
    memcpy(c->data.p + c->data.len, s, (size_t)n);
    c->data.len += (size_t)n;
    c->offsets[i + 1] = (int32_t)c->data.len;
    return 0;
}

/* value o (not None) into column c at row i; 0, UNSUPPORTED or -1 (an exception set) */
static int put(col_t *c, Py_ssize_t i, PyObject *o) {
    switch (c->type) {
    case 'q': {
        int64_t v;
        if (get_i64(o, &v))
            return UNSUPPORTED;
        ((int64_t *)c->data.p)[i] = v;
        return 0;
    }
    case 'i': {
        int64_t v;
        if (get_i64(o, &v) || v < INT32_MIN || v > INT32_MAX)
            return UNSUPPORTED;
        ((int32_t *)c->data.p)[i] = (int32_t)v;
        return 0;
    }
    case 'Q': {
        uint64_t v;
        if (get_u64(o, &v))
            return UNSUPPORTED;
        ((uint64_t *)c->data.p)[i] = v;
        return 0;
    }
    case 's': {
        if (!PyUnicode_CheckExact(o))
            return UNSUPPORTED;
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(o, &n);
        if (s == NULL) { /* surrogates: pyarrow raises its own error */
            PyErr_Clear();
            return UNSUPPORTED;
        }
        return put_bytes(c, i, s, n);
    }
    case 'b': {
        if (!PyBytes_CheckExact(o))
            return UNSUPPORTED;
        return put_bytes(c, i, PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o));
    }
    case 'l':
    case 'L': {
        if (!PyTuple_CheckExact(o) && !PyList_CheckExact(o))
            return UNSUPPORTED;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        PyObject **items = PySequence_Fast_ITEMS(o);
        if (c->child_len + n > INT32_MAX)
            return UNSUPPORTED;
        if (buf_reserve(&c->data, (size_t)n * 8) < 0)
            return -1;
        char *dst = c->data.p + c->data.len;
        for (Py_ssize_t k = 0; k < n; k++) {
            if (c->type == 'l') {
                if (get_i64(items[k], (int64_t *)dst + k))
                    return UNSUPPORTED;
            } else if (get_u64(items[k], (uint64_t *)dst + k)) {
                return UNSUPPORTED;
            }
        }
        c->data.len += (size_t)n * 8;
        c->child_len += n;
        c->offsets[i + 1] = (int32_t)c->child_len;
        return 0;
    }
    }
    return UNSUPPORTED;
}

static struct ArrowArray *new_array(int64_t length, int64_t nulls, int64_t n_buffers, int64_t n_children) {
    struct ArrowArray *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return NULL;
    a->length = length;
    a->null_count = nulls;
    a->n_buffers = n_buffers;
    a->n_children = n_children;
    a->buffers = calloc((size_t)n_buffers, sizeof(void *));
    a->private_data = calloc(1, sizeof(priv_t));
    if (n_children)
        a->children = calloc((size_t)n_children, sizeof(void *));
    a->release = release_array;
    if (a->buffers == NULL || a->private_data == NULL || (n_children && a->children == NULL)) {
        release_array(a);
        free(a);
        return NULL;
    }
    return a;
}

static inline void own(struct ArrowArray *a, int slot, void *p) {
    ((priv_t *)a->private_data)->bufs[slot] = p;
    a->buffers[slot] = p;
}

/* the finished column as an ArrowArray (takes its buffers; NULL: out of memory) */
static struct ArrowArray *col_array(col_t *c, int64_t n) {
    int fixed = c->type == 'q' || c->type == 'i' || c->type == 'Q';
    int list = c->type == 'l' || c->type == 'L';
    struct ArrowArray *a = new_array(n, c->nulls, fixed || list ? 2 : 3, list ? 1 : 0);
    if (a == NULL)
        return NULL;
    if (c->nulls) {
        own(a, 0, c->valid);
    } else {
        free(c->valid);
    }
    c->valid = NULL;
    if (fixed) {
        own(a, 1, c->data.p);
        c->data.p = NULL;
        return a;
    }
    own(a, 1, c->offsets);
    c->offsets = NULL;
    if (!list) {
        own(a, 2, c->data.p);
        c->data.p = NULL;
        return a;
    }
    struct ArrowArray *child = new_array(c->child_len, 0, 2, 0);
    if (child == NULL) {
        release_array(a);
        free(a);
        return NULL;
    }
    own(child, 1, c->data.p);
    c->data.p = NULL;
    a->children[0] = child;
    return a;
}

static void capsule_free(PyObject *cap) {
    struct ArrowArray *a = PyCapsule_GetPointer(cap, "kvtrace.ArrowArray");
    if (a != NULL) {
        if (a->release != NULL)
            a->release(a);
        free(a);
    }
}

static PyObject *columns(PyObject *self, PyObject *args) {
    PyObject *rows;
    const char *spec;
    Py_ssize_t ncol;
    if (!PyArg_ParseTuple(args, "O!y#", &PyList_Type, &rows, &spec, &ncol))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(rows);
    col_t *cols = calloc((size_t)ncol, sizeof(col_t));
    if (cols == NULL)
        return PyErr_NoMemory();
    struct ArrowArray *top = NULL;
    int rc = 0;
    size_t vbytes = (size_t)(n + 7) / 8;
    for (Py_ssize_t j = 0; j < ncol && rc == 0; j++) {
        col_t *c = &cols[j];
        c->type = spec[j];
        c->valid = malloc(vbytes ? vbytes : 1);
        if (c->valid == NULL) {
            rc = -1;
            break;
        }
        memset(c->valid, 0xFF, vbytes);
        if (n & 7) /* the bits past the last row are 0, as pyarrow leaves them */
            c->valid[vbytes - 1] = (uint8_t)((1u << (n & 7)) - 1);
        if (c->type == 'q' || c->type == 'Q' || c->type == 'i') {
            size_t w = c->type == 'i' ? 4 : 8;
            c->data.p = calloc((size_t)n ? (size_t)n : 1, w);
            c->data.cap = c->data.len = (size_t)n * w;
            if (c->data.p == NULL)
                rc = -1;
        } else if (strchr("sblL", c->type) != NULL) {
            c->offsets = malloc(((size_t)n + 1) * 4);
            if (c->offsets == NULL)
                rc = -1;
            else
                c->offsets[0] = 0;
        } else {
            PyErr_Format(PyExc_ValueError, "unknown column type %c", c->type);
            rc = -1;
        }
    }
    if (rc < 0) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyTuple_CheckExact(row) || PyTuple_GET_SIZE(row) != ncol) {
            rc = UNSUPPORTED;
            break;
        }
        for (Py_ssize_t j = 0; j < ncol; j++) {
            col_t *c = &cols[j];
            PyObject *o = PyTuple_GET_ITEM(row, j);
            if (o == Py_None) {
                set_null(c, i);
                if (c->offsets != NULL)
                    c->offsets[i + 1] = c->offsets[i];
                continue;
            }
            rc = put(c, i, o);
            if (rc)
                break;
        }
    }
    if (rc == UNSUPPORTED) {
        for (Py_ssize_t j = 0; j < ncol; j++)
            col_free(&cols[j]);
        free(cols);
        Py_RETURN_NONE;
    }
    if (rc < 0)
        goto fail;
    top = new_array(n, 0, 1, ncol);
    if (top == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t j = 0; j < ncol; j++) {
        top->children[j] = col_array(&cols[j], n);
        if (top->children[j] == NULL) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    for (Py_ssize_t j = 0; j < ncol; j++)
        col_free(&cols[j]);
    free(cols);
    PyObject *cap = PyCapsule_New(top, "kvtrace.ArrowArray", capsule_free);
    if (cap == NULL) {
        release_array(top);
        free(top);
        return NULL;
    }
    return Py_BuildValue("(KN)", (unsigned long long)(uintptr_t)top, cap);
fail:
    for (Py_ssize_t j = 0; j < ncol; j++)
        col_free(&cols[j]);
    free(cols);
    if (top != NULL) {
        release_array(top);
        free(top);
    }
    return NULL;
}

static PyObject *pick(PyObject *self, PyObject *args) {
    PyObject *rows, *kinds, *colspec, *seq_fn;
    Py_ssize_t kind_col;
    if (!PyArg_ParseTuple(args, "O!nOO!O", &PyList_Type, &rows, &kind_col, &kinds, &PyTuple_Type, &colspec,
                          &seq_fn))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(rows), m = PyTuple_GET_SIZE(colspec);
    if (m < 1) {
        PyErr_SetString(PyExc_ValueError, "pick: no columns");
        return NULL;
    }
    Py_ssize_t *pos = PyMem_Malloc((size_t)m * sizeof(Py_ssize_t));
    if (pos == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t k = 0; k < m; k++) {
        pos[k] = PyLong_AsSsize_t(PyTuple_GET_ITEM(colspec, k));
        if (pos[k] == -1 && PyErr_Occurred()) {
            PyMem_Free(pos);
            return NULL;
        }
    }
    PyObject *idx = PyList_New(0), *out = PyList_New(m), *slots = PyList_New(0);
    if (idx == NULL || out == NULL || slots == NULL)
        goto fail;
    for (Py_ssize_t k = 0; k < m; k++) {
        PyObject *l = PyList_New(0);
        if (l == NULL)
            goto fail;
        PyList_SET_ITEM(out, k, l);
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) <= kind_col) {
            PyErr_SetString(PyExc_TypeError, "pick: rows must be tuples");
            goto fail;
        }
        int in = PySet_Contains(kinds, PyTuple_GET_ITEM(row, kind_col));
        if (in < 0)
            goto fail;
        if (!in)
            continue;
        PyObject *ix = PyLong_FromSsize_t(i);
        if (ix == NULL || PyList_Append(idx, ix) < 0) {
            Py_XDECREF(ix);
            goto fail;
        }
        Py_DECREF(ix);
        for (Py_ssize_t k = 0; k < m; k++) {
            if (pos[k] < 0 || pos[k] >= PyTuple_GET_SIZE(row)) {
                PyErr_SetString(PyExc_IndexError, "pick: column out of range");
                goto fail;
            }
            PyObject *v = PyTuple_GET_ITEM(row, pos[k]);
            if (PyList_Append(PyList_GET_ITEM(out, k), v) < 0)
                goto fail;
        }
        PyObject *s = PyTuple_GET_ITEM(row, pos[m - 1]);
        if (s == Py_None || PyTuple_CheckExact(s) || PyList_CheckExact(s)) {
            if (PyList_Append(slots, s) < 0)
                goto fail;
        } else {
            PyObject *conv = PyObject_CallOneArg(seq_fn, s);
            if (conv == NULL || PyList_Append(slots, conv) < 0) {
                Py_XDECREF(conv);
                goto fail;
            }
            Py_DECREF(conv);
        }
    }
    PyMem_Free(pos);
    return Py_BuildValue("(NNN)", idx, out, slots);
fail:
    PyMem_Free(pos);
    Py_XDECREF(idx);
    Py_XDECREF(out);
    Py_XDECREF(slots);
    return NULL;
}


/* ---------------------------------------------------------------- the ring's bookkeeping */

enum { K_ALLOC = 1, K_FREE, K_POST, K_DONE, K_ERROR, K_RELEASE, K_REGISTER, K_DEREGISTER, K_START, K_REQ_DONE,
       K_ABORT };

static PyObject *MINUS_ONE, *ONE;

/* d[key] = d.get(key, 0) + n (n may be negative: then popped when <= 0, as _unref does) */
static int add_count(PyObject *d, PyObject *key, long long n, int pop_le0) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL && PyErr_Occurred())
        return -1;
    long long cur = 0;
    if (v != NULL) {
        cur = PyLong_AsLongLong(v);
        if (cur == -1 && PyErr_Occurred())
            return -1;
    }
    long long left = cur + n;
    if (pop_le0 && left <= 0) {
        if (v != NULL && PyDict_DelItem(d, key) < 0)
            return -1;
        return 0;
    }
    PyObject *nv = PyLong_FromLongLong(left);
    if (nv == NULL)
        return -1;
    int rc = PyDict_SetItem(d, key, nv);
    Py_DECREF(nv);
    return rc;
}

/* if t > last.get(owner, -1): last[owner] = t */
static int bump_last(PyObject *last, PyObject *owner, PyObject *t) {
    PyObject *prev = PyDict_GetItemWithError(last, owner);
    if (prev == NULL && PyErr_Occurred())
        return -1;
    int gt = PyObject_RichCompareBool(t, prev != NULL ? prev : MINUS_ONE, Py_GT);
    if (gt < 0)
        return -1;
    return gt ? PyDict_SetItem(last, owner, t) : 0;
}

/* RingStore._unref(owner, t, n) */
static int unref(PyObject *refs, PyObject *last, PyObject *owner, PyObject *t, long long n) {
    if (add_count(refs, owner, -n, 1) < 0)
        return -1;
    return bump_last(last, owner, t);
}

/* Owners.set(row, owner): pos maps owner -> code, uniq lists them, codes per row */
static int own_set(PyObject *pos, PyObject *uniq, int32_t *codes, Py_ssize_t ncodes, Py_ssize_t row,
                   PyObject *owner) {
    if (row < 0 || row >= ncodes) {
        PyErr_SetString(PyExc_IndexError, "book: row out of range");
        return -1;
    }
    PyObject *j = PyDict_GetItemWithError(pos, owner);
    long long code;
    if (j == NULL) {
        if (PyErr_Occurred())
            return -1;
        code = PyList_GET_SIZE(uniq);
        PyObject *nj = PyLong_FromLongLong(code);
        if (nj == NULL)
            return -1;
        int rc = PyDict_SetItem(pos, owner, nj);
        Py_DECREF(nj);
        if (rc < 0 || PyList_Append(uniq, owner) < 0)
            return -1;
    } else {
        code = PyLong_AsLongLong(j);
        if (code == -1 && PyErr_Occurred())
            return -1;
    }
    codes[row] = (int32_t)code;
    return 0;
}

/* partners.setdefault(a, set()).add(b) */
static int partner(PyObject *partners, PyObject *a, PyObject *b) {
    PyObject *s = PyDict_GetItemWithError(partners, a);
    if (s == NULL) {
        if (PyErr_Occurred())
            return -1;
        s = PySet_New(NULL);
        if (s == NULL)
            return -1;
        int rc = PyDict_SetItem(partners, a, s);
        Py_DECREF(s);
        if (rc < 0)
            return -1;
    }
    return PySet_Add(s, b);
}

static int do_alloc(PyObject *const *st, PyObject *owner, PyObject *agent, PyObject *pool, PyObject *sl) {
    PyObject *refs = st[0], *holders = st[5], *gens = st[6], *partners = st[7];
    PyObject *seq = PySequence_Fast(sl, "book: slots must be a sequence");
    if (seq == NULL)
        return -1;
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    long long n = 0;
    int rc = -1;
    for (Py_ssize_t k = 0; k < ns; k++) {
        PyObject *key = PyTuple_Pack(3, agent, pool, items[k]);
        if (key == NULL)
            goto out;
        PyObject *gen = PyDict_GetItemWithError(gens, key);
        if (gen == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(key);
                goto out;
            }
            PyObject *g = PySet_New(NULL), *h = PyDict_New();
            int bad = g == NULL || h == NULL || PySet_Add(g, owner) < 0 || PyDict_SetItem(h, owner, ONE) < 0;
            if (!bad)
                bad = PyDict_SetItem(gens, key, g) < 0 || PyDict_SetItem(holders, key, h) < 0;
            Py_XDECREF(g);
            Py_XDECREF(h);
            Py_DECREF(key);
            if (bad)
                goto out;
            n++;
            continue;
        }
        int in = PySet_Contains(gen, owner);
        if (in < 0) {
            Py_DECREF(key);
            goto out;
        }
        if (!in) {
            Py_INCREF(gen);
            PyObject *it = PyObject_GetIter(gen), *m;
            if (it == NULL) {
                Py_DECREF(gen);
                Py_DECREF(key);
                goto out;
            }
            int bad = 0;
            while (!bad && (m = PyIter_Next(it)) != NULL) {
                bad = partner(partners, m, owner) < 0 || partner(partners, owner, m) < 0;
                Py_DECREF(m);
            }
            Py_DECREF(it);
            if (bad || PyErr_Occurred() || PySet_Add(gen, owner) < 0) {
                Py_DECREF(gen);
                Py_DECREF(key);
                goto out;
            }
            Py_DECREF(gen);
            n++;
        }
        PyObject *held = PyDict_GetItemWithError(holders, key);
        if (held == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetObject(PyExc_KeyError, key);
            Py_DECREF(key);
            goto out;
        }
        Py_DECREF(key);
        if (add_count(held, owner, 1, 0) < 0)
            goto out;
    }
    if (n && add_count(refs, owner, n, 0) < 0)
        goto out;
    rc = 0;
out:
    Py_DECREF(seq);
    return rc;
}

static int do_free(PyObject *const *st, PyObject *owner, PyObject *agent, PyObject *pool, PyObject *sl, PyObject *t) {
    PyObject *refs = st[0], *last = st[1], *holders = st[5], *gens = st[6];
    PyObject *seq = PySequence_Fast(sl, "book: slots must be a sequence");
    if (seq == NULL)
        return -1;
    PyObject *ended = PyDict_New();
    int rc = -1;
    if (ended == NULL)
        goto out;
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t k = 0; k < ns; k++) {
        PyObject *key = PyTuple_Pack(3, agent, pool, items[k]);
        if (key == NULL)
            goto out;
        PyObject *held = PyDict_GetItemWithError(holders, key);
        int truth = held == NULL ? 0 : PyObject_IsTrue(held);
        if ((held == NULL && PyErr_Occurred()) || truth < 0) {
            Py_DECREF(key);
            goto out;
        }
        if (!truth) {
            Py_DECREF(key);
            continue;
        }
        Py_INCREF(held);
        PyObject *c = PyDict_GetItemWithError(held, owner);
        int ct = c == NULL ? 0 : PyObject_IsTrue(c);
        if ((c == NULL && PyErr_Occurred()) || ct < 0)
            goto bad;
        if (ct) {
            int le1 = PyObject_RichCompareBool(c, ONE, Py_LE);
            if (le1 < 0)
                goto bad;
            if (le1 ? PyDict_DelItem(held, owner) < 0 : add_count(held, owner, -1, 0) < 0)
                goto bad;
            if (PyDict_GET_SIZE(held) == 0) {
                if (PyDict_DelItem(holders, key) < 0)
                    goto bad;
                PyObject *gen = PyDict_GetItemWithError(gens, key);
                if (gen == NULL && PyErr_Occurred())
                    goto bad;
                if (gen != NULL) {
                    Py_INCREF(gen);
                    if (PyDict_DelItem(gens, key) < 0) {
                        Py_DECREF(gen);
                        goto bad;
                    }
                    PyObject *it = PyObject_GetIter(gen), *m;
                    Py_DECREF(gen);
                    if (it == NULL)
                        goto bad;
                    int err = 0;
                    while (!err && (m = PyIter_Next(it)) != NULL) {
                        err = add_count(ended, m, 1, 0) < 0;
                        Py_DECREF(m);
                    }
                    Py_DECREF(it);
                    if (err || PyErr_Occurred())
                        goto bad;
                }
            }
        }
        Py_DECREF(held);
        Py_DECREF(key);
        continue;
    bad:
        Py_DECREF(held);
        Py_DECREF(key);
        goto out;
    }
    Py_ssize_t p = 0;
    PyObject *m, *cnt;
    while (PyDict_Next(ended, &p, &m, &cnt)) {
        long long nn = PyLong_AsLongLong(cnt);
        if (nn == -1 && PyErr_Occurred())
            goto out;
        if (unref(refs, last, m, t, nn) < 0)
            goto out;
    }
    rc = 0;
out:
    Py_XDECREF(ended);
    Py_DECREF(seq);
    return rc;
}

/* book(state, kind_codes, pos, uniq, codes, ts, agents, kinds, reqs, pools, xfers, addrs, slot_lists, idx,
 *      xfer_tag, region_tag) -> [j of each xfer_error row]
 * RingStore._ingest_events' loop over the rows that change liveness (see there), on its lists
 * (row j of the lists is row idx[j] of the batch); state: (refs, last_t, open, inflight,
 * xfer_owner, holders, gen, partners); kind_codes: kind -> K_* below; pos, uniq, codes: the
 * batch's Owners (codes: its int32 array), for the rows whose owner is a transfer or region. */
static PyObject *book(PyObject *self, PyObject *args) {
    PyObject *state, *kcodes, *pos, *uniq, *codes_obj, *L[9], *xtag, *rtag;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OO!O!O!O!O!O!O!O!O!OO", &PyTuple_Type, &state, &PyDict_Type, &kcodes,
                          &PyDict_Type, &pos, &PyList_Type, &uniq, &codes_obj, &PyList_Type, &L[0], &PyList_Type,
                          &L[1], &PyList_Type, &L[2], &PyList_Type, &L[3], &PyList_Type, &L[4], &PyList_Type, &L[5],
                          &PyList_Type, &L[6], &PyList_Type, &L[7], &PyList_Type, &L[8], &xtag, &rtag))
        return NULL;
    if (PyTuple_GET_SIZE(state) != 8) {
        PyErr_SetString(PyExc_ValueError, "book: state is 8 containers");
        return NULL;
    }
    PyObject *const *st = &PyTuple_GET_ITEM(state, 0);
    for (int k = 0; k < 8; k++) {
        int ok = k == 2 ? PySet_Check(st[k]) : PyDict_Check(st[k]);
        if (!ok) {
            PyErr_SetString(PyExc_TypeError, "book: state containers of the wrong type");
            return NULL;
        }
    }
    Py_ssize_t n = PyList_GET_SIZE(L[0]);
    for (int k = 1; k < 9; k++) {
        if (PyList_GET_SIZE(L[k]) != n) {
            PyErr_SetString(PyExc_ValueError, "book: lists of different lengths");
            return NULL;
        }
    }
    Py_buffer cb;
    if (PyObject_GetBuffer(codes_obj, &cb, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (cb.itemsize != 4) {
        PyBuffer_Release(&cb);
        PyErr_SetString(PyExc_TypeError, "book: codes must be int32");
        return NULL;
    }
    Py_ssize_t ncodes = cb.len / 4;
    int32_t *codes = (int32_t *)cb.buf;
    PyObject *refs = st[0], *last = st[1], *open_ = st[2], *inflight = st[3], *xown = st[4];
    PyObject *errors = PyList_New(0);
    if (errors == NULL)
        goto fail;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *kind = PyList_GET_ITEM(L[2], j), *req = PyList_GET_ITEM(L[3], j);
        PyObject *kc = PyDict_GetItemWithError(kcodes, kind);
        if (kc == NULL) {
            if (PyErr_Occurred())
                goto fail;
            continue; /* not a kind the bookkeeping reads */
        }
        long code = PyLong_AsLong(kc);
        PyObject *xfer = PyList_GET_ITEM(L[5], j), *agent = PyList_GET_ITEM(L[1], j);
        PyObject *t = PyList_GET_ITEM(L[0], j), *owner;
        if (req != Py_None) {
            owner = req;
            Py_INCREF(owner);
        } else if (code >= K_POST && code <= K_RELEASE && xfer != Py_None) {
            owner = PyTuple_Pack(2, xtag, xfer);
        } else if (code == K_REGISTER || code == K_DEREGISTER) {
            owner = PyTuple_Pack(3, rtag, agent, PyList_GET_ITEM(L[6], j));
        } else {
            continue;
        }
        if (owner == NULL)
            goto fail;
        if (owner != req) {
            Py_ssize_t row = PyLong_AsSsize_t(PyList_GET_ITEM(L[8], j));
            if ((row == -1 && PyErr_Occurred()) || own_set(pos, uniq, codes, ncodes, row, owner) < 0) {
                Py_DECREF(owner);
                goto fail;
            }
        }
        int rc = 0;
        switch (code) {
        case K_ALLOC:
        case K_FREE: {
            PyObject *sl = PyList_GET_ITEM(L[7], j);
            int truth = PyObject_IsTrue(sl);
            if (truth < 0)
                rc = -1;
            else if (truth)
                rc = code == K_ALLOC ? do_alloc(st, owner, agent, PyList_GET_ITEM(L[4], j), sl)
                                     : do_free(st, owner, agent, PyList_GET_ITEM(L[4], j), sl, t);
            break;
        }
        case K_POST: {
            PyObject *prev = PyDict_GetItemWithError(inflight, xfer);
            if (prev == NULL && PyErr_Occurred()) {
                rc = -1;
                break;
            }
            if (prev != NULL) { /* a re-post before completion: one reference */
                Py_INCREF(prev);
                rc = PyDict_DelItem(inflight, xfer) < 0 || unref(refs, last, prev, t, 1) < 0 ? -1 : 0;
                Py_DECREF(prev);
                if (rc)
                    break;
            }
            rc = PyDict_SetItem(inflight, xfer, owner) < 0 || PyDict_SetItem(xown, xfer, owner) < 0 ||
                         add_count(refs, owner, 1, 0) < 0
                     ? -1
                     : 0;
            break;
        }
        case K_DONE:
        case K_ERROR:
        case K_RELEASE: {
            PyObject *prev = PyDict_GetItemWithError(inflight, xfer);
            if (prev == NULL && PyErr_Occurred()) {
                rc = -1;
                break;
            }
            if (prev != NULL) {
                Py_INCREF(prev);
                rc = PyDict_DelItem(inflight, xfer) < 0 || unref(refs, last, prev, t, 1) < 0 ? -1 : 0;
                Py_DECREF(prev);
                if (rc)
                    break;
            }
            if (code == K_ERROR) {
                PyObject *jj = PyLong_FromSsize_t(j);
                rc = jj == NULL || PyList_Append(errors, jj) < 0 ? -1 : 0;
                Py_XDECREF(jj);
            }
            break;
        }
        case K_START:
            rc = PySet_Add(open_, owner);
            break;
        case K_REQ_DONE:
        case K_ABORT:
            rc = PySet_Discard(open_, owner) < 0 ? -1 : 0;
            break;
        case K_REGISTER:
            rc = add_count(refs, owner, 1, 0);
            break;
        case K_DEREGISTER: {
            PyObject *r = PyDict_GetItemWithError(refs, owner);
            int truth = r == NULL ? 0 : PyObject_IsTrue(r);
            if ((r == NULL && PyErr_Occurred()) || truth < 0)
                rc = -1;
            else if (truth)
                rc = unref(refs, last, owner, t, 1);
            break;
        }
        }
        Py_DECREF(owner);
        if (rc < 0)
            goto fail;
    }
    PyBuffer_Release(&cb);
    return errors;
fail:
    PyBuffer_Release(&cb);
    Py_XDECREF(errors);
    return NULL;
}

static PyMethodDef methods[] = {
    {"columns", columns, METH_VARARGS, "rows -> an Arrow C struct array (address, capsule), or None"},
    {"pick", pick, METH_VARARGS, "the ring bookkeeping's rows and columns"},
    {"book", book, METH_VARARGS, "the ring bookkeeping's loop over its rows"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rows",
                                    "the recorder's event rows to Arrow in C", -1, methods};

PyMODINIT_FUNC PyInit__rows(void) {
    MINUS_ONE = PyLong_FromLong(-1);
    ONE = PyLong_FromLong(1);
    if (MINUS_ONE == NULL || ONE == NULL)
        return NULL;
    return PyModule_Create(&module);
}
