/* The recorder's rows in C (kvtrace.tracer._rows): recorded, converted to Arrow, booked.
 *
 * Built by setup.py as an OPTIONAL extension: an install without a C compiler still works and
 * tracer/recorder.py falls back to its Python methods and pyarrow's own conversion of the row
 * tuples (same rows, slower);
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
 *
 * book(...): the ring bookkeeping's loop over those rows (see there).
 *
 * appender(rec, ...) -> an object whose event / nixl_event / layers / allocs / frees append the
 *   rows Recorder's Python methods of those names append, on the recorder's own buffer (see there;
 *   Recorder.__init__ installs them on the instance unless KVTRACE_ROWS=python).
 *
 * json_text(o) -> str | None: a plain detail as the recorder's JSON text (see there).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <structmember.h>

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

/* deps.setdefault(a, set()).add(b) */
static int depend(PyObject *deps, PyObject *a, PyObject *b) {
    PyObject *s = PyDict_GetItemWithError(deps, a);
    if (s == NULL) {
        if (PyErr_Occurred())
            return -1;
        s = PySet_New(NULL);
        if (s == NULL)
            return -1;
        int rc = PyDict_SetItem(deps, a, s);
        Py_DECREF(s);
        if (rc < 0)
            return -1;
    }
    return PySet_Add(s, b);
}

/* slots[(agent, pool)]: that pool's held slots (created when ``make``; borrowed, NULL with no
 * error when absent) */
static PyObject *pool_slots(PyObject *slots, PyObject *agent, PyObject *pool, int make) {
    PyObject *pk = PyTuple_Pack(2, agent, pool);
    if (pk == NULL)
        return NULL;
    PyObject *d = PyDict_GetItemWithError(slots, pk);
    if (d == NULL && !PyErr_Occurred() && make) {
        d = PyDict_New();
        if (d != NULL) {
            int bad = PyDict_SetItem(slots, pk, d) < 0;
            Py_DECREF(d);   /* slots holds it */
            if (bad)
                d = NULL;
        }
    }
    Py_DECREF(pk);
    return d;
}

/* del slots[(agent, pool)] (its last held slot was freed) */
static int drop_pool(PyObject *slots, PyObject *agent, PyObject *pool) {
    PyObject *pk = PyTuple_Pack(2, agent, pool);
    if (pk == NULL)
        return -1;
    int rc = PyDict_DelItem(slots, pk);
    Py_DECREF(pk);
    return rc;
}

/* slots[(agent, pool)][slot]: the owner that founded the slot's generation when it alone holds it, once;
 * else [founder, {holder: holds}] (RingStore._ingest_events) */
static int do_alloc(PyObject *const *st, PyObject *owner, PyObject *agent, PyObject *pool, PyObject *sl) {
    PyObject *refs = st[0], *deps = st[6];
    PyObject *seq = PySequence_Fast(sl, "book: slots must be a sequence");
    if (seq == NULL)
        return -1;
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    long long n = 0;
    int rc = -1;
    PyObject *slots = pool_slots(st[5], agent, pool, 1);   /* borrowed */
    if (slots == NULL)
        goto out;
    for (Py_ssize_t k = 0; k < ns; k++) {
        PyObject *key = items[k];
        Py_INCREF(key);
        PyObject *v = PyDict_GetItemWithError(slots, key);
        int bad = 0;
        if (v == NULL) {            /* from free: the owner founds a generation */
            bad = PyErr_Occurred() != NULL || PyDict_SetItem(slots, key, owner) < 0;
            n++;
        } else if (!PyList_CheckExact(v)) {     /* held once by its founder */
            int same = PyObject_RichCompareBool(v, owner, Py_EQ);
            PyObject *held = same < 0 ? NULL : PyDict_New(), *pair = NULL;
            bad = held == NULL;
            if (!bad && same)
                bad = add_count(held, owner, 2, 0) < 0;
            else if (!bad) {        /* joins: depends on the founder, referenced while it holds */
                bad = add_count(held, v, 1, 0) < 0 || add_count(held, owner, 1, 0) < 0 || depend(deps, owner, v) < 0;
                n++;
            }
            if (!bad) {
                pair = PyList_New(2);
                bad = pair == NULL;
            }
            if (!bad) {
                Py_INCREF(v);
                PyList_SET_ITEM(pair, 0, v);
                Py_INCREF(held);
                PyList_SET_ITEM(pair, 1, held);
                bad = PyDict_SetItem(slots, key, pair) < 0;   /* releases v's reference from slots */
            }
            Py_XDECREF(pair);
            Py_XDECREF(held);
        } else {                    /* [founder, holders] */
            PyObject *founder = PyList_GET_ITEM(v, 0), *held = PyList_GET_ITEM(v, 1);
            int is_f = PyObject_RichCompareBool(founder, owner, Py_EQ);
            int holds = is_f ? 1 : PyDict_Contains(held, owner);
            bad = is_f < 0 || holds < 0;
            if (!bad && !holds) {
                bad = depend(deps, owner, founder) < 0;
                n++;
            }
            if (!bad)
                bad = add_count(held, owner, 1, 0) < 0;
        }
        Py_DECREF(key);
        if (bad)
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
    PyObject *refs = st[0], *last = st[1];
    PyObject *seq = PySequence_Fast(sl, "book: slots must be a sequence");
    if (seq == NULL)
        return -1;
    PyObject *ended = PyDict_New();
    int rc = -1;
    if (ended == NULL)
        goto out;
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *slots = pool_slots(st[5], agent, pool, 0);   /* borrowed; NULL: none held */
    if (slots == NULL && PyErr_Occurred())
        goto out;
    for (Py_ssize_t k = 0; slots != NULL && k < ns; k++) {
        PyObject *key = items[k];
        Py_INCREF(key);
        PyObject *v = PyDict_GetItemWithError(slots, key);
        int bad = v == NULL && PyErr_Occurred();
        if (v != NULL && !PyList_CheckExact(v)) {     /* held once by its founder */
            int same = PyObject_RichCompareBool(v, owner, Py_EQ);
            bad = same < 0;
            if (!bad && same)       /* the generation ends: its founder lets go */
                bad = add_count(ended, owner, 1, 0) < 0 || PyDict_DelItem(slots, key) < 0;
        } else if (v != NULL) {
            Py_INCREF(v);
            PyObject *founder = PyList_GET_ITEM(v, 0), *held = PyList_GET_ITEM(v, 1);
            PyObject *c = PyDict_GetItemWithError(held, owner);
            int ct = c == NULL ? 0 : PyObject_IsTrue(c);
            bad = (c == NULL && PyErr_Occurred()) || ct < 0;
            if (!bad && ct) {
                int le1 = PyObject_RichCompareBool(c, ONE, Py_LE);
                bad = le1 < 0;
                if (!bad)
                    bad = le1 ? PyDict_DelItem(held, owner) < 0 : add_count(held, owner, -1, 0) < 0;
                if (!bad && le1) {  /* its last hold of the slot: a joiner (not the founder) lets go */
                    int is_f = PyObject_RichCompareBool(founder, owner, Py_EQ);
                    bad = is_f < 0 || (!is_f && add_count(ended, owner, 1, 0) < 0);
                }
                if (!bad && PyDict_GET_SIZE(held) == 0)   /* the generation ends: its founder lets go */
                    bad = add_count(ended, founder, 1, 0) < 0 || PyDict_DelItem(slots, key) < 0;
            }
            Py_DECREF(v);
        }
        Py_DECREF(key);
        if (bad)
            goto out;
    }
    if (slots != NULL && PyDict_GET_SIZE(slots) == 0 && drop_pool(st[5], agent, pool) < 0)
        goto out;
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
 * xfer_owner, slots, deps); kind_codes: kind -> K_* below; pos, uniq, codes: the
 * batch's Owners (codes: its int32 array), for the rows whose owner is a transfer or region. */
static PyObject *book(PyObject *self, PyObject *args) {
    PyObject *state, *kcodes, *pos, *uniq, *codes_obj, *L[9], *xtag, *rtag;
    if (!PyArg_ParseTuple(args, "O!O!O!O!OO!O!O!O!O!O!O!O!O!OO", &PyTuple_Type, &state, &PyDict_Type, &kcodes,
                          &PyDict_Type, &pos, &PyList_Type, &uniq, &codes_obj, &PyList_Type, &L[0], &PyList_Type,
                          &L[1], &PyList_Type, &L[2], &PyList_Type, &L[3], &PyList_Type, &L[4], &PyList_Type, &L[5],
                          &PyList_Type, &L[6], &PyList_Type, &L[7], &PyList_Type, &L[8], &xtag, &rtag))
        return NULL;
    if (PyTuple_GET_SIZE(state) != 7) {
        PyErr_SetString(PyExc_ValueError, "book: state is 7 containers");
        return NULL;
    }
    PyObject *const *st = &PyTuple_GET_ITEM(state, 0);
    for (int k = 0; k < 7; k++) {
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

/* ---------------------------------------------------------------- detail text
 * json_text(o) -> str | None: o as JSON text exactly as json.JSONEncoder(separators=(",", ":"))
 * .encode(o) gives it, for the plain values engines put in a detail: dicts with str keys, lists,
 * tuples, ASCII str, int, bool, None (exact types, nested at most 16 deep). None: something else
 * (a float, a non-ASCII str, a subclass, ...), left to the Python encoder, which also gives its
 * usual error for what JSON cannot hold. */

#define JSON_DEPTH 16

static int json_lit(buf_t *b, const char *s, size_t n) {
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

static int json_str(buf_t *b, PyObject *o) {
    if (!PyUnicode_IS_ASCII(o))
        return UNSUPPORTED;
    Py_ssize_t n = PyUnicode_GET_LENGTH(o);
    const unsigned char *s = PyUnicode_1BYTE_DATA(o);
    if (buf_reserve(b, (size_t)n * 6 + 2) < 0)
        return -1;
    char *d = b->p + b->len;
    *d++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= ' ' && c <= '~' && c != '"' && c != '\\') {
            *d++ = (char)c;
            continue;
        }
        *d++ = '\\';
        switch (c) {
        case '"': *d++ = '"'; break;
        case '\\': *d++ = '\\'; break;
        case '\n': *d++ = 'n'; break;
        case '\r': *d++ = 'r'; break;
        case '\t': *d++ = 't'; break;
        case '\b': *d++ = 'b'; break;
        case '\f': *d++ = 'f'; break;
        default:
            *d++ = 'u';
            *d++ = '0';
            *d++ = '0';
            *d++ = "0123456789abcdef"[c >> 4];
            *d++ = "0123456789abcdef"[c & 15];
        }
    }
    *d++ = '"';
    b->len = (size_t)(d - b->p);
    return 0;
}

static int json_put(buf_t *b, PyObject *o, int depth) {
    if (depth > JSON_DEPTH)
        return UNSUPPORTED;
    if (o == Py_None)
        return json_lit(b, "null", 4);
    if (o == Py_True)
        return json_lit(b, "true", 4);
    if (o == Py_False)
        return json_lit(b, "false", 5);
    if (PyUnicode_CheckExact(o))
        return json_str(b, o);
    if (PyLong_CheckExact(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow)
            return UNSUPPORTED;
        char tmp[24], *e = tmp + sizeof tmp, *d = e;  /* int.__repr__ */
        unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
        do {
            *--d = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (v < 0)
            *--d = '-';
        return json_lit(b, d, (size_t)(e - d));
    }
    if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        PyObject **items = PySequence_Fast_ITEMS(o);
        if (json_lit(b, "[", 1) < 0)
            return -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            int rc = (i && json_lit(b, ",", 1) < 0) ? -1 : json_put(b, items[i], depth + 1);
            if (rc)
                return rc;
        }
        return json_lit(b, "]", 1);
    }
    if (PyDict_CheckExact(o)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        int first = 1;
        if (json_lit(b, "{", 1) < 0)
            return -1;
        while (PyDict_Next(o, &pos, &k, &v)) {
            if (!PyUnicode_CheckExact(k))
                return UNSUPPORTED;
            int rc = (!first && json_lit(b, ",", 1) < 0) ? -1 : json_str(b, k);
            if (!rc)
                rc = json_lit(b, ":", 1) < 0 ? -1 : json_put(b, v, depth + 1);
            if (rc)
                return rc;
            first = 0;
        }
        return json_lit(b, "}", 1);
    }
    return UNSUPPORTED;
}

/* new reference: the text, Py_None (not plain: the caller's encoder's turn), NULL on error */
static buf_t JSON_BUF;  /* reused: json_put runs no Python code, so no other thread enters meanwhile */

static PyObject *json_fast(PyObject *o) {
    buf_t *b = &JSON_BUF;
    b->len = 0;
    int rc = json_put(b, o, 0);
    PyObject *r = NULL;
    if (rc == 0) {
        r = PyUnicode_New((Py_ssize_t)b->len, 127);  /* ASCII text, as the Python encoder's */
        if (r != NULL)
            memcpy(PyUnicode_1BYTE_DATA(r), b->p, b->len);
    } else if (rc == UNSUPPORTED) {
        r = Py_NewRef(Py_None);
    }
    if (b->cap > 65536) {  /* a rare large detail: not kept */
        free(b->p);
        b->p = NULL;
        b->cap = 0;
    }
    return r;
}

static PyObject *json_text(PyObject *self, PyObject *o) { return json_fast(o); }

/* encode(o) unless json_fast does it */
static PyObject *detail_text(PyObject *o, PyObject *encode) {
    PyObject *r = json_fast(o);
    if (r == Py_None) {
        Py_DECREF(r);
        r = PyObject_CallOneArg(encode, o);
    }
    return r;
}

/* ---------------------------------------------------------------- the engine-side appender
 *
 * appender(rec, events, seq, threads, request_var, kinds, encode, shared, reason_detail, fallbacks)
 *   An object whose methods event, nixl_event, layers, allocs and frees append exactly the row
 *   tuples Recorder's Python methods of those names append (tracer/recorder.py, which installs them
 *   on the instance), with no Python frame: the seq from the recorder's own itertools.count, the
 *   thread number from its thread map (a new thread through rec._thread_id()), the monotonic
 *   clock (CLOCK_MONOTONIC, what time.monotonic_ns reads on Linux), the request from the
 *   contextvar when none is given, an EventKind through ``kinds``, a detail that is not a str
 *   as JSON text (json_text above, else ``encode``: the recorder's JSON encoder), and the flush wake-up
 *   (seq - rec._flushed_seq >= rec.flush_rows and not rec._wake.is_set(): rec._wake.set()).
 *   The event path takes no lock, as in Python: the clock, the seq and the append run with no
 *   Python code between them (so no thread switch), the rest of the row is built before.
 *   layers / allocs / frees while the recorder has a hashing thread (rec._hasher not None, which
 *   those methods consult) go to the Python methods in ``fallbacks`` (layers, allocs, frees).
 */

typedef struct {
    PyObject_HEAD
    PyObject *rec, *dict, *events, *seq, *threads, *reqvar, *kinds, *encode, *shared, *reason_detail, *fallbacks;
} AppenderObject;

static PyObject *S_flushed_seq, *S_flush_rows, *S_wake, *S_is_set, *S_set, *S_thread_id, *S_hasher, *S_alloc,
    *S_free;
#define N_EVENT_ARGS 18
static PyObject *EVENT_ARGS[N_EVENT_ARGS], *NIXL_ARGS[9], *LAYERS_ARGS[8], *ALLOCS_ARGS[4], *FREES_ARGS[4];

static int intern_all(PyObject **out, const char *const *names, int n) {
    for (int i = 0; i < n; i++) {
        out[i] = PyUnicode_InternFromString(names[i]);
        if (out[i] == NULL)
            return -1;
    }
    return 0;
}

static int appender_names(void) {
    static const char *const ev[N_EVENT_ARGS] = {"kind", "agent", "request", "pool", "layer", "slots",
                                                 "pages", "checksums", "xfer", "peer", "addr", "nbytes",
                                                 "mem_type", "device", "msg", "status", "detail", "t_ns"};
    static const char *const nx[9] = {"kind", "agent", "request", "xfer", "peer", "nbytes", "msg", "status",
                                      "detail"};
    static const char *const ly[8] = {"kind", "agent", "request", "pool", "layers", "slots", "pages", "checksums"};
    static const char *const al[4] = {"agent", "request", "items", "shared"};
    static const char *const fr[4] = {"agent", "request", "items", "reason"};
    static const char *const misc[9] = {"_flushed_seq", "flush_rows", "_wake", "is_set", "set", "_thread_id",
                                        "_hasher", "alloc", "free"};
    PyObject *m[9];
    if (intern_all(EVENT_ARGS, ev, N_EVENT_ARGS) < 0 || intern_all(NIXL_ARGS, nx, 9) < 0 ||
        intern_all(LAYERS_ARGS, ly, 8) < 0 || intern_all(ALLOCS_ARGS, al, 4) < 0 ||
        intern_all(FREES_ARGS, fr, 4) < 0 || intern_all(m, misc, 9) < 0)
        return -1;
    S_flushed_seq = m[0], S_flush_rows = m[1], S_wake = m[2], S_is_set = m[3], S_set = m[4];
    S_thread_id = m[5], S_hasher = m[6], S_alloc = m[7], S_free = m[8];
    return 0;
}

/* Python's binding of arguments to parameters: the first npos of names positional-or-keyword,
   the rest keyword-only, the first nreq required; out[i]: borrowed, NULL when not given. */
static int bind(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, PyObject *const *names,
                int nnames, int npos, int nreq, PyObject **out) {
    for (int i = 0; i < nnames; i++)
        out[i] = NULL;
    if (nargs > npos) {
        PyErr_Format(PyExc_TypeError, "Recorder.%s() takes at most %d positional arguments (%zd given)", fn, npos,
                     nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        out[i] = args[i];
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int j = -1;
        for (int i = 0; i < nnames && j < 0; i++)
            if (names[i] == key)
                j = i;
        for (int i = 0; i < nnames && j < 0; i++)
            if (PyUnicode_Compare(key, names[i]) == 0)
                j = i;
        if (PyErr_Occurred())
            return -1;
        if (j < 0) {
            PyErr_Format(PyExc_TypeError, "Recorder.%s() got an unexpected keyword argument '%S'", fn, key);
            return -1;
        }
        if (out[j] != NULL) {
            PyErr_Format(PyExc_TypeError, "Recorder.%s() got multiple values for argument '%S'", fn, key);
            return -1;
        }
        out[j] = args[nargs + k];
    }
    for (int i = 0; i < nreq; i++) {
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "Recorder.%s() missing required argument: '%S'", fn, names[i]);
            return -1;
        }
    }
    return 0;
}

/* rec.<name> (new reference): from the instance dict, else the usual lookup */
static PyObject *rec_attr(AppenderObject *a, PyObject *name) {
    PyObject *v = PyDict_GetItemWithError(a->dict, name);
    if (v != NULL) {
        Py_INCREF(v);
        return v;
    }
    if (PyErr_Occurred())
        return NULL;
    return PyObject_GetAttr(a->rec, name);
}

static PyObject *now_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    return PyLong_FromLongLong((long long)ts.tv_sec * 1000000000LL + (long long)ts.tv_nsec);
}

/* request if not None, else current_request.get() */
static PyObject *request_of(AppenderObject *a, PyObject *req) {
    if (req != NULL && req != Py_None) {
        Py_INCREF(req);
        return req;
    }
    PyObject *v = NULL;
    if (PyContextVar_Get(a->reqvar, NULL, &v) < 0)
        return NULL;
    if (v == NULL)
        PyErr_SetObject(PyExc_LookupError, a->reqvar);
    return v;
}

/* self._threads.get(get_ident()), else self._thread_id() */
static PyObject *thread_no(AppenderObject *a) {
    PyObject *key = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    if (key == NULL)
        return NULL;
    PyObject *th = PyDict_GetItemWithError(a->threads, key);
    Py_DECREF(key);
    if (th != NULL) {
        Py_INCREF(th);
        return th;
    }
    if (PyErr_Occurred())
        return NULL;
    return PyObject_CallMethodNoArgs(a->rec, S_thread_id);
}

/* kind if a str, else kinds[kind] */
static PyObject *kind_of(AppenderObject *a, PyObject *kind) {
    if (PyUnicode_CheckExact(kind)) {
        Py_INCREF(kind);
        return kind;
    }
    return PyObject_GetItem(a->kinds, kind);
}

static inline int small(long long v) { return v > -(1LL << 62) && v < (1LL << 62); }

/* if seq - rec._flushed_seq >= rec.flush_rows and not rec._wake.is_set(): rec._wake.set() */
static int wake_check(AppenderObject *a, PyObject *seq) {
    PyObject *flushed = rec_attr(a, S_flushed_seq);
    if (flushed == NULL)
        return -1;
    PyObject *rows = rec_attr(a, S_flush_rows);
    if (rows == NULL) {
        Py_DECREF(flushed);
        return -1;
    }
    int due = -1;
    if (PyLong_CheckExact(seq) && PyLong_CheckExact(flushed) && PyLong_CheckExact(rows)) {
        int o1 = 0, o2 = 0, o3 = 0;
        long long s = PyLong_AsLongLongAndOverflow(seq, &o1), f = PyLong_AsLongLongAndOverflow(flushed, &o2),
                  r = PyLong_AsLongLongAndOverflow(rows, &o3);
        if (!o1 && !o2 && !o3 && small(s) && small(f))
            due = s - f >= r;
    }
    if (due < 0) {
        PyObject *d = PyNumber_Subtract(seq, flushed);
        due = d == NULL ? -1 : PyObject_RichCompareBool(d, rows, Py_GE);
        Py_XDECREF(d);
    }
    Py_DECREF(flushed);
    Py_DECREF(rows);
    if (due <= 0)
        return due;
    PyObject *wake = rec_attr(a, S_wake);
    if (wake == NULL)
        return -1;
    PyObject *is = PyObject_CallMethodNoArgs(wake, S_is_set);
    int set = is == NULL ? -1 : PyObject_IsTrue(is);
    Py_XDECREF(is);
    if (set == 0) {
        PyObject *r = PyObject_CallMethodNoArgs(wake, S_set);
        set = r == NULL ? -1 : 1;
        Py_XDECREF(r);
    }
    Py_DECREF(wake);
    return set < 0 ? -1 : 0;
}

/* whether the garbage collector tracks v, after untracking it when it is a tuple of untracked
   items (what a collection does to every tuple: _PyTuple_MaybeUntrack) */
static int tracked(PyObject *v) {
    if (!PyObject_IS_GC(v) || !PyObject_GC_IsTracked(v))
        return 0;
    if (!PyTuple_CheckExact(v))
        return 1;
    for (Py_ssize_t i = 0, n = PyTuple_GET_SIZE(v); i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(v, i);
        if (x == NULL || (PyObject_IS_GC(x) && PyObject_GC_IsTracked(x)))
            return 1;
    }
    PyObject_GC_UnTrack(v);
    return 0;
}

/* a 20-item row, items 1.. from vals (borrowed; NULL: None), item 0 (the seq) left NULL (an int
   comes there, and in item 1 when it is NULL). A row that holds no object the garbage collector
   tracks (its slot, page and checksum tuples untracked first when they hold only ints) is
   untracked at once, as its first collection would do: buffered rows are then never traversed
   by a collection (measured: ~0.2 us per row in collections). */
static PyObject *new_row(PyObject *const *vals) {
    PyObject *row = PyTuple_New(20);
    if (row == NULL)
        return NULL;
    int any = 0;
    for (int i = 1; i < 20; i++) {
        PyObject *v = vals[i] != NULL ? vals[i] : Py_None;
        Py_INCREF(v);
        PyTuple_SET_ITEM(row, i, v);
        any |= tracked(v);
    }
    if (!any)
        PyObject_GC_UnTrack(row);
    return row;
}

/* the clock (unless t is given), the seq, the append: no Python code runs between them */
static PyObject *stamp_append(AppenderObject *a, PyObject *row, int with_time) {
    if (with_time) {
        PyObject *t = now_ns();
        if (t == NULL)
            return NULL;
        Py_SETREF(PyTuple_GET_ITEM(row, 1), t);  /* replaces the placeholder None */
    }
    PyObject *seq = Py_TYPE(a->seq)->tp_iternext(a->seq);
    if (seq == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "the recorder's seq counter ended");
        return NULL;
    }
    Py_INCREF(seq);
    PyTuple_SET_ITEM(row, 0, seq);
    if (PyList_Append(a->events, row) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    if (wake_check(a, seq) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    return seq;
}

static PyObject *ap_event(AppenderObject *a, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *v[N_EVENT_ARGS];
    if (bind("event", args, nargs, kwnames, EVENT_ARGS, N_EVENT_ARGS, 3, 1, v) < 0)
        return NULL;
    PyObject *request = NULL, *detail = NULL, *kind = NULL, *th = NULL, *t = NULL, *row = NULL, *seq = NULL;
    if ((request = request_of(a, v[2])) == NULL)
        goto done;
    PyObject *d = v[16];
    if (d != NULL && d != Py_None && !PyUnicode_CheckExact(d)) {
        if ((detail = detail_text(d, a->encode)) == NULL)
            goto done;
    } else {
        detail = d != NULL ? d : Py_None;
        Py_INCREF(detail);
    }
    if ((kind = kind_of(a, v[0])) == NULL || (th = thread_no(a)) == NULL)
        goto done;
    int given = 0;
    if (v[17] != NULL && v[17] != Py_None && (given = PyObject_IsTrue(v[17])) < 0)  /* t_ns or monotonic_ns() */
        goto done;
    if (given)
        t = v[17];
    PyObject *vals[20] = {NULL, t, th, v[1], kind, request, v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10],
                          v[11], v[12], v[13], v[14], v[15], detail};
    if ((row = new_row(vals)) != NULL)
        seq = stamp_append(a, row, !given);
done:
    Py_XDECREF(request);
    Py_XDECREF(detail);
    Py_XDECREF(kind);
    Py_XDECREF(th);
    Py_XDECREF(row);
    return seq;
}

static PyObject *nixl_row(AppenderObject *a, PyObject *const *v);

static PyObject *ap_nixl_event(AppenderObject *a, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *v[9];
    if (bind("nixl_event", args, nargs, kwnames, NIXL_ARGS, 9, 9, 3, v) < 0)
        return NULL;
    return nixl_row(a, v);
}

/* nixl_event's row from its 9 values (kind, agent, request, xfer, peer, nbytes, msg, status,
   detail; borrowed, NULL: None): the new seq */
static PyObject *nixl_row(AppenderObject *a, PyObject *const *v) {
    PyObject *request = NULL, *th = NULL, *row = NULL, *seq = NULL;
    if ((request = request_of(a, v[2])) == NULL || (th = thread_no(a)) == NULL)
        goto done;
    PyObject *vals[20] = {NULL, NULL, th, v[1], v[0], request, NULL, NULL, NULL, NULL, NULL, v[3], v[4], NULL,
                          v[5], NULL, NULL, v[6], v[7], v[8]};
    if ((row = new_row(vals)) != NULL)
        seq = stamp_append(a, row, 1);
done:
    Py_XDECREF(request);
    Py_XDECREF(th);
    Py_XDECREF(row);
    return seq;
}

/* rec._hasher is not None: the Python method (fallbacks[which]) does the call */
static int hashing(AppenderObject *a) {
    PyObject *h = rec_attr(a, S_hasher);
    if (h == NULL)
        return -1;
    int busy = h != Py_None;
    Py_DECREF(h);
    return busy;
}

static PyObject *to_python(AppenderObject *a, int which, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames) {
    Py_ssize_t n = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    PyObject **all = PyMem_Malloc((size_t)(n + 1) * sizeof(PyObject *));
    if (all == NULL)
        return PyErr_NoMemory();
    all[0] = a->rec;
    for (Py_ssize_t i = 0; i < n; i++)
        all[i + 1] = args[i];
    PyObject *r = PyObject_Vectorcall(PyTuple_GET_ITEM(a->fallbacks, which), all, (size_t)nargs + 1, kwnames);
    PyMem_Free(all);
    return r;
}

/* rows (a list of rows from new_row) into the buffer, numbered, with one clock reading t;
   the first seq, or -1 when there are none */
static PyObject *append_batch(AppenderObject *a, PyObject *rows) {
    Py_ssize_t n = PyList_GET_SIZE(rows);
    if (n == 0)
        return PyLong_FromLong(-1);
    PyObject *first = NULL, *last = NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *seq = Py_TYPE(a->seq)->tp_iternext(a->seq);
        if (seq == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "the recorder's seq counter ended");
            return NULL;
        }
        PyTuple_SET_ITEM(PyList_GET_ITEM(rows, i), 0, seq);
        if (i == 0)
            first = seq;
        last = seq;
    }
    Py_ssize_t at = PyList_GET_SIZE(a->events);  /* one extend, atomic like Python's */
    if (PyList_SetSlice(a->events, at, at, rows) < 0)
        return NULL;
    Py_INCREF(first);
    Py_INCREF(last);
    int rc = wake_check(a, last);
    Py_DECREF(last);
    if (rc < 0) {
        Py_DECREF(first);
        return NULL;
    }
    return first;
}

/* request, th, t as Recorder._batch_head */
static int batch_head(AppenderObject *a, PyObject *req, PyObject **request, PyObject **th, PyObject **t) {
    *request = request_of(a, req);
    *th = *request == NULL ? NULL : thread_no(a);
    *t = *th == NULL ? NULL : now_ns();
    return *t == NULL ? -1 : 0;
}

static PyObject *tuple_or_none(PyObject *o) {
    if (o == NULL || o == Py_None) {
        Py_INCREF(Py_None);
        return Py_None;
    }
    return PySequence_Tuple(o);
}

/* A layers() call's rows wait in the buffer as one entry, made into its rows by expand() when
   the flush takes them (tracer/recorder.py, Recorder._flush_locked): the engine's thread builds one
   tuple per call, not one per layer (61 at DeepSeek's depth), and the flush builds the rows just
   before it reads them, not ~0.5 s after, when they have left the caches. The entry:
   (LAYERS_MARK, seq0, t, th, agent, kind, request, pool, layers, slots, pages, cs), its rows taking
   the seqs seq0 .. seq0 + layers - 1 (taken from the counter at the call, as append_batch does),
   cs None or a tuple of the layers' checksum tuples. */
#define LAYERS_ENTRY 12
static PyObject *LAYERS_MARK;

static inline int is_layers_entry(PyObject *x) {
    return PyTuple_CheckExact(x) && PyTuple_GET_SIZE(x) == LAYERS_ENTRY && PyTuple_GET_ITEM(x, 0) == LAYERS_MARK;
}

/* n seqs from the counter into seqs[0..n-1] (new references); -1 on error (none kept) */
static int take_seqs(AppenderObject *a, Py_ssize_t n, PyObject **seqs) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if ((seqs[i] = Py_TYPE(a->seq)->tp_iternext(a->seq)) == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "the recorder's seq counter ended");
            for (Py_ssize_t k = 0; k < i; k++)
                Py_DECREF(seqs[k]);
            return -1;
        }
    }
    return 0;
}

/* whether seqs are the ints s0 .. s0 + n - 1 (the recorder's itertools.count: always) */
static int consecutive(PyObject *const *seqs, Py_ssize_t n) {
    int overflow = 0;
    if (!PyLong_CheckExact(seqs[0]) || !PyLong_CheckExact(seqs[n - 1]))
        return 0;
    long long s0 = PyLong_AsLongLongAndOverflow(seqs[0], &overflow);
    if (overflow || !small(s0)) {
        PyErr_Clear();
        return 0;
    }
    long long s1 = PyLong_AsLongLongAndOverflow(seqs[n - 1], &overflow);
    if (overflow || s1 - s0 != n - 1) {
        PyErr_Clear();
        return 0;
    }
    for (Py_ssize_t i = 1; i < n - 1; i++)
        if (!PyLong_CheckExact(seqs[i]) || PyLong_AsLongLong(seqs[i]) != s0 + i) {
            PyErr_Clear();
            return 0;
        }
    return 1;
}

/* layer's row of a layers() entry's values e (is_layers_entry), its seq given (stolen); NULL on error */
static PyObject *layer_row(PyObject *const *e, Py_ssize_t layer, PyObject *seq) {
    PyObject *l = PyLong_FromSsize_t(layer), *row = NULL;
    if (l != NULL && seq != NULL) {
        PyObject *vals[20] = {NULL, e[2], e[3], e[4], e[5], e[6], e[7], l, e[9], e[10],
                              e[11] == Py_None ? NULL : PyTuple_GET_ITEM(e[11], layer)};
        row = new_row(vals);
    }
    Py_XDECREF(l);
    if (row == NULL) {
        Py_XDECREF(seq);
        return NULL;
    }
    PyTuple_SET_ITEM(row, 0, seq);
    return row;
}

static PyObject *ap_layers(AppenderObject *a, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *v[8];
    if (bind("layers", args, nargs, kwnames, LAYERS_ARGS, 8, 8, 6, v) < 0)
        return NULL;
    int h = hashing(a);
    if (h)
        return h < 0 ? NULL : to_python(a, 0, args, nargs, kwnames);
    PyObject *kind = NULL, *request = NULL, *th = NULL, *t = NULL, *slots = NULL, *pages = NULL, *cs = NULL,
             *nl = NULL, *entry = NULL, *last = NULL, *out = NULL, *small_seqs[64], **seqs = small_seqs;
    Py_ssize_t n = 0, have_seqs = 0;
    if ((kind = kind_of(a, v[0])) == NULL || batch_head(a, v[2], &request, &th, &t) < 0)
        goto done;
    if ((slots = PySequence_Tuple(v[5])) == NULL || (pages = tuple_or_none(v[6])) == NULL)
        goto done;
    if ((nl = PyNumber_Index(v[4])) == NULL)  /* range(layers) */
        goto done;
    n = PyLong_AsSsize_t(nl);
    if (n == -1 && PyErr_Occurred())
        goto done;
    if (n <= 0) {
        out = PyLong_FromLong(-1);
        goto done;
    }
    Py_SETREF(nl, PyLong_FromSsize_t(n));
    if (nl == NULL)
        goto done;
    PyObject *cs_all = v[7] != NULL && v[7] != Py_None ? v[7] : NULL;
    if (cs_all != NULL) {  /* checksums[layer] per layer, as tuples (what the rows hold) */
        if ((cs = PyTuple_New(n)) == NULL)
            goto done;
        for (Py_ssize_t layer = 0; layer < n; layer++) {
            PyObject *l = PyLong_FromSsize_t(layer);
            if (l == NULL)
                goto done;
            PyObject *c = PyObject_GetItem(cs_all, l);
            Py_DECREF(l);
            PyObject *ct = c == NULL ? NULL : PySequence_Tuple(c);
            Py_XDECREF(c);
            if (ct == NULL)
                goto done;
            PyTuple_SET_ITEM(cs, layer, ct);
        }
    }
    PyObject *vals[LAYERS_ENTRY] = {LAYERS_MARK, NULL, t, th, v[1], kind, request, v[3], nl, slots, pages,
                                    cs != NULL ? cs : Py_None};
    if ((entry = PyTuple_New(LAYERS_ENTRY)) == NULL)
        goto done;
    if (n > 64 && (seqs = PyMem_Malloc((size_t)n * sizeof(PyObject *))) == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* the clock was read, the row values are ready: the seqs and the append, no Python code between */
    if (take_seqs(a, n, seqs) < 0)
        goto done;
    have_seqs = n;
    vals[1] = seqs[0];
    last = Py_NewRef(seqs[n - 1]);
    int any = 0;
    for (int i = 0; i < LAYERS_ENTRY; i++) {
        PyTuple_SET_ITEM(entry, i, Py_NewRef(vals[i]));
        any |= i > 0 && tracked(vals[i]);
    }
    if (!any)
        PyObject_GC_UnTrack(entry);
    if (consecutive(seqs, n)) {  /* one entry, expanded at the flush */
        if (PyList_Append(a->events, entry) < 0)
            goto done;
    } else {  /* another counter: the rows now */
        PyObject *rows = PyList_New(n);
        if (rows == NULL)
            goto done;
        for (Py_ssize_t layer = 0; layer < n; layer++) {
            PyObject *row = layer_row(&PyTuple_GET_ITEM(entry, 0), layer, seqs[layer]);
            seqs[layer] = NULL;
            if (row == NULL) {
                for (Py_ssize_t k = layer; k < n; k++)
                    PyList_SET_ITEM(rows, k, Py_NewRef(Py_None));
                Py_DECREF(rows);
                goto done;
            }
            PyList_SET_ITEM(rows, layer, row);
        }
        Py_ssize_t at = PyList_GET_SIZE(a->events);
        int rc = PyList_SetSlice(a->events, at, at, rows);
        Py_DECREF(rows);
        if (rc < 0)
            goto done;
    }
    if (wake_check(a, last) < 0)
        goto done;
    out = Py_NewRef(PyTuple_GET_ITEM(entry, 1));
done:
    for (Py_ssize_t i = 0; i < have_seqs; i++)
        Py_XDECREF(seqs[i]);
    if (seqs != small_seqs)
        PyMem_Free(seqs);
    Py_XDECREF(kind);
    Py_XDECREF(request);
    Py_XDECREF(th);
    Py_XDECREF(t);
    Py_XDECREF(slots);
    Py_XDECREF(pages);
    Py_XDECREF(cs);
    Py_XDECREF(nl);
    Py_XDECREF(entry);
    Py_XDECREF(last);
    return out;
}

/* expand(rows): rows with each layers() entry (above) replaced by its rows, the rows ap_layers
   appended before entries (the same tuples Recorder.layers appends); rows itself when it holds none */
static PyObject *expand(PyObject *self, PyObject *rows) {
    if (!PyList_CheckExact(rows)) {
        PyErr_SetString(PyExc_TypeError, "expand: a list expected");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(rows), total = 0, entries = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyList_GET_ITEM(rows, i);
        if (is_layers_entry(x)) {
            total += PyLong_AsSsize_t(PyTuple_GET_ITEM(x, 8));
            entries++;
        } else {
            total++;
        }
    }
    if (entries == 0)
        return Py_NewRef(rows);
    PyObject *out = PyList_New(total);
    if (out == NULL)
        return NULL;
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyList_GET_ITEM(rows, i);
        if (!is_layers_entry(x)) {
            PyList_SET_ITEM(out, at++, Py_NewRef(x));
            continue;
        }
        PyObject *const *e = &PyTuple_GET_ITEM(x, 0);
        Py_ssize_t nl = PyLong_AsSsize_t(e[8]);
        long long s0 = PyLong_AsLongLong(e[1]);
        for (Py_ssize_t layer = 0; layer < nl; layer++) {
            PyObject *row = layer_row(e, layer, layer == 0 ? Py_NewRef(e[1]) : PyLong_FromLongLong(s0 + layer));
            if (row == NULL) {
                for (Py_ssize_t k = at; k < total; k++)  /* the list's unset items: a valid list to free */
                    PyList_SET_ITEM(out, k, Py_NewRef(Py_None));
                Py_DECREF(out);
                return NULL;
            }
            PyList_SET_ITEM(out, at++, row);
        }
    }
    return out;
}

/* it[i] */
static PyObject *item(PyObject *it, Py_ssize_t i) {
    if (PyTuple_CheckExact(it) || PyList_CheckExact(it))
        return PySequence_GetItem(it, i);
    PyObject *k = PyLong_FromSsize_t(i);
    if (k == NULL)
        return NULL;
    PyObject *r = PyObject_GetItem(it, k);
    Py_DECREF(k);
    return r;
}

static PyObject *range_tuple(Py_ssize_t n) {
    PyObject *r = PyTuple_New(n);
    for (Py_ssize_t i = 0; r != NULL && i < n; i++) {
        PyObject *x = PyLong_FromSsize_t(i);
        if (x == NULL)
            Py_CLEAR(r);
        else
            PyTuple_SET_ITEM(r, i, x);
    }
    return r;
}

static PyObject *ap_allocs(AppenderObject *a, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *v[4];
    if (bind("allocs", args, nargs, kwnames, ALLOCS_ARGS, 4, 3, 3, v) < 0)
        return NULL;
    int h = hashing(a);
    if (h)
        return h < 0 ? NULL : to_python(a, 1, args, nargs, kwnames);
    PyObject *request = NULL, *th = NULL, *t = NULL, *rows = NULL, *iter = NULL, *it = NULL, *out = NULL;
    if (batch_head(a, v[1], &request, &th, &t) < 0 || (rows = PyList_New(0)) == NULL ||
        (iter = PyObject_GetIter(v[2])) == NULL)
        goto done;
    while ((it = PyIter_Next(iter)) != NULL) {
        PyObject *pool = NULL, *s = NULL, *slots = NULL, *p = NULL, *pages = NULL, *flag = NULL, *row = NULL;
        int ok = 0;
        if ((pool = item(it, 0)) == NULL || (s = item(it, 1)) == NULL || (slots = PySequence_Tuple(s)) == NULL ||
            (p = item(it, 2)) == NULL)
            goto next;
        if (p != Py_None) {
            pages = PySequence_Tuple(p);
        } else {
            Py_ssize_t ns = PyObject_Size(s);
            pages = ns < 0 ? NULL : range_tuple(ns);
        }
        if (pages == NULL)
            goto next;
        Py_ssize_t len = PyObject_Size(it);
        if (len < 0)
            goto next;
        if (len > 3) {
            if ((flag = item(it, 3)) == NULL)
                goto next;
        } else {
            flag = v[3] != NULL ? v[3] : Py_False;
            Py_INCREF(flag);
        }
        int sh = PyObject_IsTrue(flag);
        if (sh < 0)
            goto next;
        PyObject *vals[20] = {NULL, t, th, v[0], S_alloc, request, pool, NULL, slots, pages, NULL, NULL, NULL,
                              NULL, NULL, NULL, NULL, NULL, NULL, sh ? a->shared : NULL};
        row = new_row(vals);
        ok = row != NULL && PyList_Append(rows, row) == 0;
    next:
        Py_XDECREF(pool);
        Py_XDECREF(s);
        Py_XDECREF(slots);
        Py_XDECREF(p);
        Py_XDECREF(pages);
        Py_XDECREF(flag);
        Py_XDECREF(row);
        Py_CLEAR(it);
        if (!ok)
            goto done;
    }
    if (!PyErr_Occurred())
        out = append_batch(a, rows);
done:
    Py_XDECREF(request);
    Py_XDECREF(th);
    Py_XDECREF(t);
    Py_XDECREF(rows);
    Py_XDECREF(iter);
    return out;
}

/* p, s = it */
static int unpack2(PyObject *it, PyObject **p, PyObject **s) {
    if (PyTuple_CheckExact(it) && PyTuple_GET_SIZE(it) == 2) {
        *p = PyTuple_GET_ITEM(it, 0);
        *s = PyTuple_GET_ITEM(it, 1);
        Py_INCREF(*p);
        Py_INCREF(*s);
        return 0;
    }
    *p = *s = NULL;
    PyObject *i = PyObject_GetIter(it);
    if (i == NULL)
        return -1;
    PyObject *x[3] = {NULL, NULL, NULL};
    int k = 0;
    for (; k < 3; k++) {
        x[k] = PyIter_Next(i);
        if (x[k] == NULL)
            break;
    }
    Py_DECREF(i);
    if (PyErr_Occurred() || k != 2) {
        if (!PyErr_Occurred()) {
            if (k < 2)
                PyErr_Format(PyExc_ValueError, "not enough values to unpack (expected 2, got %d)", k);
            else
                PyErr_SetString(PyExc_ValueError, "too many values to unpack (expected 2)");
        }
        for (int j = 0; j < 3; j++)
            Py_XDECREF(x[j]);
        return -1;
    }
    *p = x[0];
    *s = x[1];
    return 0;
}

static PyObject *ap_frees(AppenderObject *a, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *v[4];
    if (bind("frees", args, nargs, kwnames, FREES_ARGS, 4, 3, 3, v) < 0)
        return NULL;
    int h = hashing(a);
    if (h)
        return h < 0 ? NULL : to_python(a, 2, args, nargs, kwnames);
    PyObject *request = NULL, *th = NULL, *t = NULL, *items = NULL, *iter = NULL, *it = NULL, *text = NULL,
             *rows = NULL, *out = NULL;
    if (batch_head(a, v[1], &request, &th, &t) < 0 || (items = PyList_New(0)) == NULL ||
        (iter = PyObject_GetIter(v[2])) == NULL)
        goto done;
    while ((it = PyIter_Next(iter)) != NULL) {  /* items = [(p, tuple(s)) for p, s in items] */
        PyObject *p, *s, *st = NULL, *pair = NULL;
        int rc = unpack2(it, &p, &s);
        Py_CLEAR(it);
        if (rc < 0)
            goto done;
        st = PySequence_Tuple(s);
        pair = st == NULL ? NULL : PyTuple_Pack(2, p, st);
        Py_DECREF(p);
        Py_DECREF(s);
        Py_XDECREF(st);
        if (pair == NULL || PyList_Append(items, pair) < 0) {
            Py_XDECREF(pair);
            goto done;
        }
        Py_DECREF(pair);
    }
    if (PyErr_Occurred())
        goto done;
    int r = v[3] == NULL ? 0 : PyObject_IsTrue(v[3]);  /* _reason_detail(reason) if reason else None */
    if (r < 0 || (r && (text = PyObject_CallOneArg(a->reason_detail, v[3])) == NULL))
        goto done;
    Py_ssize_t n = PyList_GET_SIZE(items);
    if ((rows = PyList_New(n)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(items, i);
        PyObject *vals[20] = {NULL, t, th, v[0], S_free, request, PyTuple_GET_ITEM(pair, 0), NULL,
                              PyTuple_GET_ITEM(pair, 1), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                              NULL, text};
        PyObject *row = new_row(vals);
        if (row == NULL)
            goto done;  /* a list freed with NULL items is fine */
        PyList_SET_ITEM(rows, i, row);
    }
    out = append_batch(a, rows);
done:
    Py_XDECREF(request);
    Py_XDECREF(th);
    Py_XDECREF(t);
    Py_XDECREF(items);
    Py_XDECREF(iter);
    Py_XDECREF(text);
    Py_XDECREF(rows);
    return out;
}

static int ap_traverse(AppenderObject *a, visitproc visit, void *arg) {
    Py_VISIT(a->rec);
    Py_VISIT(a->dict);
    Py_VISIT(a->events);
    Py_VISIT(a->seq);
    Py_VISIT(a->threads);
    Py_VISIT(a->reqvar);
    Py_VISIT(a->kinds);
    Py_VISIT(a->encode);
    Py_VISIT(a->shared);
    Py_VISIT(a->reason_detail);
    Py_VISIT(a->fallbacks);
    return 0;
}

static int ap_clear(AppenderObject *a) {
    Py_CLEAR(a->rec);
    Py_CLEAR(a->dict);
    Py_CLEAR(a->events);
    Py_CLEAR(a->seq);
    Py_CLEAR(a->threads);
    Py_CLEAR(a->reqvar);
    Py_CLEAR(a->kinds);
    Py_CLEAR(a->encode);
    Py_CLEAR(a->shared);
    Py_CLEAR(a->reason_detail);
    Py_CLEAR(a->fallbacks);
    return 0;
}

static void ap_dealloc(AppenderObject *a) {
    PyObject_GC_UnTrack(a);
    ap_clear(a);
    Py_TYPE(a)->tp_free((PyObject *)a);
}

static PyMethodDef ap_methods[] = {
    {"event", (PyCFunction)(void (*)(void))ap_event, METH_FASTCALL | METH_KEYWORDS, "Recorder.event"},
    {"nixl_event", (PyCFunction)(void (*)(void))ap_nixl_event, METH_FASTCALL | METH_KEYWORDS,
     "Recorder.nixl_event"},
    {"layers", (PyCFunction)(void (*)(void))ap_layers, METH_FASTCALL | METH_KEYWORDS, "Recorder.layers"},
    {"allocs", (PyCFunction)(void (*)(void))ap_allocs, METH_FASTCALL | METH_KEYWORDS, "Recorder.allocs"},
    {"frees", (PyCFunction)(void (*)(void))ap_frees, METH_FASTCALL | METH_KEYWORDS, "Recorder.frees"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kvtrace.tracer._rows.Appender",
    .tp_basicsize = sizeof(AppenderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "the recorder's per-event methods in C (see appender())",
    .tp_traverse = (traverseproc)ap_traverse,
    .tp_clear = (inquiry)ap_clear,
    .tp_dealloc = (destructor)ap_dealloc,
    .tp_methods = ap_methods,
};

static PyObject *appender(PyObject *self, PyObject *args) {
    PyObject *rec, *events, *seq, *threads, *reqvar, *kinds, *encode, *shared, *reason_detail, *fallbacks;
    if (!PyArg_ParseTuple(args, "OO!OO!OO!OOOO!", &rec, &PyList_Type, &events, &seq, &PyDict_Type, &threads,
                          &reqvar, &PyDict_Type, &kinds, &encode, &shared, &reason_detail, &PyTuple_Type,
                          &fallbacks))
        return NULL;
    if (!PyContextVar_CheckExact(reqvar) || Py_TYPE(seq)->tp_iternext == NULL || PyTuple_GET_SIZE(fallbacks) != 3) {
        PyErr_SetString(PyExc_TypeError, "appender: a ContextVar, an iterator and 3 fallbacks expected");
        return NULL;
    }
    PyObject *dict = PyObject_GenericGetDict(rec, NULL);
    if (dict == NULL)
        return NULL;
    AppenderObject *a = PyObject_GC_New(AppenderObject, &AppenderType);
    if (a == NULL) {
        Py_DECREF(dict);
        return NULL;
    }
    PyObject *all[] = {rec, events, seq, threads, reqvar, kinds, encode, shared, reason_detail, fallbacks};
    for (int i = 0; i < 10; i++)
        Py_INCREF(all[i]);
    a->rec = rec, a->dict = dict, a->events = events, a->seq = seq, a->threads = threads, a->reqvar = reqvar;
    a->kinds = kinds, a->encode = encode, a->shared = shared, a->reason_detail = reason_detail;
    a->fallbacks = fallbacks;
    PyObject_GC_Track(a);
    return (PyObject *)a;
}

/* ---------------------------------------------------------------- the NIXL tap's hot calls
 *
 * TapHandle(op, remote, notif, descs, detail, total): tracer/agent_tap.py's _Handle (same
 *   attributes, same defaults: xfer None, request None, terminal False, tagged (None, None),
 *   hashes 0), its fields read here without attribute lookups.
 *
 * tap(pytap, inner, name, appender, xfer_ids, handles, untraced, parse, telemetry, in_prog, success,
 *     consts, fallbacks, plain_hashes, dlists, text, write, empty, i64, u64, i32, plain_descs)
 *   -> an object whose postXferReq / getXferStatus / releaseXferReq / getNotifs / makeXferReq / createXferReq do what BindingTap's
 *   Python methods of those names do (the same calls into ``inner``, the same rows through the
 *   appender's nixl_event, in the same order), with no Python frame: agent_tap.py installs them on
 *   the tap when the recorder's nixl_event is this module's appender. ``xfer_ids``: the recorder's
 *   transfer id count (None: call rec.new_xfer_id()); ``consts``: (post, done, release, recv kinds,
 *   "DONE", "WRITE", "READ", the untraced reasons after close and before tracing); ``fallbacks``:
 *   BindingTap's Python methods of those six names, for calls with keyword arguments;
 *   createXferReq resolves a handle's descriptors here when get_xfer_descs made both lists of Nx3
 *   arrays (made_side), else in pytap._created;
 *   makeXferReq resolves a handle's descriptors here when both lists were seen (``dlists``: the
 *   tap's _Dlist by list handle) and the indices are int32/int64 arrays in range (its indices and
 *   addresses kept as Take, gathered at flush; np.empty(n, u64/i32) for the sizes and devices of a
 *   list with no one value for all; ``text``: the tap's agent as rows record
 *   it; ``write``: NIXL's WRITE op), else in pytap._prepped; ``plain_hashes``: the recorder's hash_mark and
 *   wait_hashes are Recorder's own (so with no hashing thread, rec._hasher None, they are 0 and
 *   a no-op: not called); a ``parse`` of tags.make_parser's presets runs in C (tag_of), others are
 *   called; ``plain_descs``: its descs_posted is Recorder's own (done here, on its
 *   lock, buffer and row count). A completion that is not a plain success (an error, or telemetry asked
 *   for) is claimed here and recorded by pytap._terminal_detail (Python: its detail, the
 *   xfer_error row the ring's trigger watches for). The claim (terminal check and set) and a
 *   posting's state update run with no Python code in between, so under the GIL a completion
 *   is recorded once even when two threads poll.
 */

typedef struct {
    PyObject_HEAD
    PyObject *op, *remote, *notif, *descs, *detail, *total, *xfer, *request, *terminal, *tagged, *hashes;
} TapHandleObject;

static PyObject *ZERO, *EMPTY_BYTES, *NONE_PAIR, *S_closed, *S_untraced, *S_new_xfer_id, *S_descs_posted,
    *S_hash_mark, *S_wait_hashes, *S_terminal_detail, *S_postXferReq, *S_getXferStatus, *S_releaseXferReq,
    *S_getNotifs, *S_makeXferReq, *S_prepped, *S_createXferReq;

#define OR_NONE(x) ((x) != NULL ? (x) : Py_None)

static PyObject *th_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *names[] = {"op", "remote", "notif", "descs", "detail", "total", NULL};
    PyObject *v[6];
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOO:TapHandle", names, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]))
        return NULL;
    TapHandleObject *h = (TapHandleObject *)type->tp_alloc(type, 0);
    if (h == NULL)
        return NULL;
    h->op = Py_NewRef(v[0]), h->remote = Py_NewRef(v[1]), h->notif = Py_NewRef(v[2]), h->descs = Py_NewRef(v[3]);
    h->detail = Py_NewRef(v[4]), h->total = Py_NewRef(v[5]);
    h->xfer = Py_NewRef(Py_None), h->request = Py_NewRef(Py_None), h->terminal = Py_NewRef(Py_False);
    h->tagged = Py_NewRef(NONE_PAIR), h->hashes = Py_NewRef(ZERO);
    return (PyObject *)h;
}

static int th_traverse(TapHandleObject *h, visitproc visit, void *arg) {
    Py_VISIT(h->op);
    Py_VISIT(h->remote);
    Py_VISIT(h->notif);
    Py_VISIT(h->descs);
    Py_VISIT(h->detail);
    Py_VISIT(h->total);
    Py_VISIT(h->xfer);
    Py_VISIT(h->request);
    Py_VISIT(h->terminal);
    Py_VISIT(h->tagged);
    Py_VISIT(h->hashes);
    return 0;
}

static int th_clear(TapHandleObject *h) {
    Py_CLEAR(h->op);
    Py_CLEAR(h->remote);
    Py_CLEAR(h->notif);
    Py_CLEAR(h->descs);
    Py_CLEAR(h->detail);
    Py_CLEAR(h->total);
    Py_CLEAR(h->xfer);
    Py_CLEAR(h->request);
    Py_CLEAR(h->terminal);
    Py_CLEAR(h->tagged);
    Py_CLEAR(h->hashes);
    return 0;
}

static void th_dealloc(TapHandleObject *h) {
    PyObject_GC_UnTrack(h);
    th_clear(h);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

#define TH_MEMBER(n) {#n, T_OBJECT, offsetof(TapHandleObject, n), 0, NULL}
static PyMemberDef th_members[] = {TH_MEMBER(op),      TH_MEMBER(remote),  TH_MEMBER(notif),    TH_MEMBER(descs),
                                   TH_MEMBER(detail),  TH_MEMBER(total),   TH_MEMBER(xfer),     TH_MEMBER(request),
                                   TH_MEMBER(terminal), TH_MEMBER(tagged), TH_MEMBER(hashes),   {NULL}};

static PyTypeObject TapHandleType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kvtrace.tracer._rows.TapHandle",
    .tp_basicsize = sizeof(TapHandleObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "one transfer handle of the NIXL tap (agent_tap._Handle's fields)",
    .tp_traverse = (traverseproc)th_traverse,
    .tp_clear = (inquiry)th_clear,
    .tp_dealloc = (destructor)th_dealloc,
    .tp_members = th_members,
    .tp_new = th_new,
};

enum { C_POST, C_DONE, C_RELEASE, C_RECV, C_DONE_TEXT, C_WRITE, C_READ, C_CLOSED, C_UNTRACED, N_CONSTS };

typedef struct {
    PyObject_HEAD
    AppenderObject *ap;
    PyObject *pytap, *inner, *name, *xfer_ids, *handles, *untraced, *parse, *in_prog, *success, *consts, *fallbacks;
    PyObject *dlists, *text, *write, *empty, *i64, *u64, *i32;
    int telemetry, plain_hashes, plain_descs;
    int tags;  /* parse is tags.make_parser's of presets: TAG_SGLANG / TAG_VLLM bits, tried in that order */
} TapObject;

#define CONST(t, i) PyTuple_GET_ITEM((t)->consts, i)

/* inner.<meth>(*args) */
static PyObject *inner_call(TapObject *t, PyObject *meth, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *small_[8], **all = small_;
    if (nargs + 1 > 8 && (all = PyMem_Malloc((size_t)(nargs + 1) * sizeof(PyObject *))) == NULL)
        return PyErr_NoMemory();
    all[0] = t->inner;
    for (Py_ssize_t i = 0; i < nargs; i++)
        all[i + 1] = args[i];
    PyObject *r = PyObject_VectorcallMethod(meth, all, (size_t)(nargs + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (all != small_)
        PyMem_Free(all);
    return r;
}

/* BindingTap's Python method fallbacks[which](pytap, *args, **kw) */
static PyObject *py_method(TapObject *t, int which, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    Py_ssize_t n = nargs + (kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames));
    PyObject **all = PyMem_Malloc((size_t)(n + 1) * sizeof(PyObject *));
    if (all == NULL)
        return PyErr_NoMemory();
    all[0] = t->pytap;
    for (Py_ssize_t i = 0; i < n; i++)
        all[i + 1] = args[i];
    PyObject *r = PyObject_Vectorcall(PyTuple_GET_ITEM(t->fallbacks, which), all, (size_t)nargs + 1, kwnames);
    PyMem_Free(all);
    return r;
}

/* rec.closed */
static int rec_closed(TapObject *t) {
    PyObject *c = rec_attr(t->ap, S_closed);
    if (c == NULL)
        return -1;
    int r = PyObject_IsTrue(c);
    Py_DECREF(c);
    return r;
}

/* rec._hasher is None (and hash_mark / wait_hashes are Recorder's): 1 */
static int no_hasher(TapObject *t) {
    if (!t->plain_hashes)
        return 0;
    PyObject *h = rec_attr(t->ap, S_hasher);
    if (h == NULL)
        return -1;
    int none = h == Py_None;
    Py_DECREF(h);
    return none;
}

/* agent_tap._bytes of a true msg */
static PyObject *as_bytes(PyObject *msg) {
    if (PyUnicode_Check(msg))
        return PyUnicode_AsUTF8String(msg);
    if (PyBytes_CheckExact(msg))
        return Py_NewRef(msg);
    return PyObject_CallOneArg((PyObject *)&PyBytes_Type, msg);
}

/* agent_tap._name */
static PyObject *agent_name(PyObject *agent) {
    if (PyBytes_Check(agent) || PyByteArray_Check(agent) || PyMemoryView_Check(agent)) {
        PyObject *b = PyObject_CallOneArg((PyObject *)&PyBytes_Type, agent);
        if (b == NULL)
            return NULL;
        PyObject *s = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b), "replace");
        Py_DECREF(b);
        return s;
    }
    return Py_NewRef(agent);
}

/* BindingTap._terminal: record the end of H's latest posting once (status, or error: the exception) */
static int terminal(TapObject *t, PyObject *handle, TapHandleObject *H, PyObject *status, PyObject *error) {
    int done = PyObject_IsTrue(OR_NONE(H->terminal));
    if (done < 0)
        return -1;
    if (done || OR_NONE(H->xfer) == Py_None)
        return 0;
    Py_SETREF(H->terminal, Py_NewRef(Py_True));
    Py_INCREF(H);
    int rc = -1;
    int write = PyObject_RichCompareBool(OR_NONE(H->op), CONST(t, C_WRITE), Py_EQ);
    if (write < 0)
        goto out;
    if (write) {  /* the engine may reuse the pages this posting read once it hears: hash them first */
        int skip = no_hasher(t);
        if (skip < 0)
            goto out;
        if (!skip) {
            PyObject *r = PyObject_CallMethodOneArg(t->ap->rec, S_wait_hashes, OR_NONE(H->hashes));
            if (r == NULL)
                goto out;
            Py_DECREF(r);
        }
    }
    int ok = 0;
    if (error == NULL && (ok = PyObject_RichCompareBool(status, t->success, Py_EQ)) < 0)
        goto out;
    if (ok && !t->telemetry) {  /* the common case: no detail */
        PyObject *v[9] = {CONST(t, C_DONE), t->name, H->request, H->xfer, H->remote, H->total, NULL,
                          CONST(t, C_DONE_TEXT), NULL};
        PyObject *seq = nixl_row(t->ap, v);
        if (seq == NULL)
            goto out;
        Py_DECREF(seq);
        rc = 0;
        goto out;
    }
    PyObject *args[] = {t->pytap, handle, (PyObject *)H, OR_NONE(status), OR_NONE(error), ok ? Py_True : Py_False};
    PyObject *r = PyObject_VectorcallMethod(S_terminal_detail, args, 6 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (r != NULL) {
        Py_DECREF(r);
        rc = 0;
    }
out:
    Py_DECREF(H);
    return rc;
}

/* a call into NIXL raised: an Exception is recorded as the end of H's posting (H may be NULL: none),
   then raised again */
static PyObject *failed(TapObject *t, PyObject *handle, TapHandleObject *H) {
    PyObject *type, *val, *tb;
    PyErr_Fetch(&type, &val, &tb);
    PyErr_NormalizeException(&type, &val, &tb);
    if (tb != NULL && val != NULL)
        PyException_SetTraceback(val, tb);
    if (H != NULL && val != NULL && PyErr_GivenExceptionMatches(type, PyExc_Exception) &&
        terminal(t, handle, H, NULL, val) < 0) {
        /* what went wrong while recording it, with NIXL's error as its context (as in Python) */
        PyObject *t2, *v2, *tb2;
        PyErr_Fetch(&t2, &v2, &tb2);
        PyErr_NormalizeException(&t2, &v2, &tb2);
        if (v2 != NULL) {
            if (tb2 != NULL)
                PyException_SetTraceback(v2, tb2);
            PyException_SetContext(v2, val);  /* steals val */
            val = NULL;
        }
        Py_XDECREF(type);
        Py_XDECREF(val);
        Py_XDECREF(tb);
        PyErr_Restore(t2, v2, tb2);
        return NULL;
    }
    PyErr_Restore(type, val, tb);
    return NULL;
}

/* handles.get(handle) as a new reference (NULL and no error: none) */
static TapHandleObject *handle_of(TapObject *t, PyObject *handle) {
    PyObject *H = PyDict_GetItemWithError(t->handles, handle);
    if (H != NULL && !PyObject_TypeCheck(H, &TapHandleType)) {
        PyErr_SetString(PyExc_TypeError, "the tap's handles must be TapHandle objects");
        return NULL;
    }
    Py_XINCREF(H);
    return (TapHandleObject *)H;
}

/* Recorder.descs_posted(xfer, prepared) in C:
       with rec._lock: rec._descs.append((int(xfer),) + prepared); rec._pending_rows += prepared[-1]
       if rec._pending_rows >= rec.flush_rows and not rec._wake.is_set(): rec._wake.set() */
static int descs_posted(TapObject *t, PyObject *xfer, PyObject *prepared) {
    static PyObject *S_lock = NULL, *S_descs_list, *S_pending, *S_acquire, *S_release;
    if (S_lock == NULL) {
        static const char *const nm[5] = {"_lock", "_descs", "_pending_rows", "acquire", "release"};
        PyObject *o[5];
        if (intern_all(o, nm, 5) < 0)
            return -1;
        S_descs_list = o[1], S_pending = o[2], S_acquire = o[3], S_release = o[4];
        S_lock = o[0];
    }
    if (!PyTuple_Check(prepared) || PyTuple_GET_SIZE(prepared) == 0) {
        PyErr_SetString(PyExc_TypeError, "descs_posted: a prepared tuple expected");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(prepared);
    PyObject *x = PyNumber_Long(xfer), *row = x == NULL ? NULL : PyTuple_New(n + 1);
    if (row == NULL) {
        Py_XDECREF(x);
        return -1;
    }
    PyTuple_SET_ITEM(row, 0, x);
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(row, i + 1, Py_NewRef(PyTuple_GET_ITEM(prepared, i)));
    PyObject *lock = rec_attr(t->ap, S_lock);
    PyObject *r = lock == NULL ? NULL : PyObject_CallMethodNoArgs(lock, S_acquire);
    if (r == NULL) {
        Py_XDECREF(lock);
        Py_DECREF(row);
        return -1;
    }
    Py_DECREF(r);
    int rc = -1;
    PyObject *list = rec_attr(t->ap, S_descs_list), *pending = NULL, *sum = NULL;
    if (list != NULL && PyList_Append(list, row) == 0 && (pending = rec_attr(t->ap, S_pending)) != NULL &&
        (sum = PyNumber_Add(pending, PyTuple_GET_ITEM(prepared, n - 1))) != NULL &&
        PyObject_SetAttr(t->ap->rec, S_pending, sum) == 0)
        rc = 0;
    Py_XDECREF(list);
    Py_XDECREF(pending);
    PyObject *type, *val, *tb;
    PyErr_Fetch(&type, &val, &tb);
    r = PyObject_CallMethodNoArgs(lock, S_release);
    Py_DECREF(lock);
    Py_DECREF(row);
    if (r == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(val);
        Py_XDECREF(tb);
        Py_XDECREF(sum);
        return -1;
    }
    Py_DECREF(r);
    PyErr_Restore(type, val, tb);
    if (rc < 0) {
        Py_XDECREF(sum);
        return -1;
    }
    /* the flush wake-up, as Recorder.descs_posted (its _pending_rows read again, outside the lock) */
    Py_DECREF(sum);
    PyObject *now = rec_attr(t->ap, S_pending), *rows = now == NULL ? NULL : rec_attr(t->ap, S_flush_rows);
    int due = rows == NULL ? -1 : PyObject_RichCompareBool(now, rows, Py_GE);
    Py_XDECREF(now);
    Py_XDECREF(rows);
    if (due <= 0)
        return due;
    PyObject *wake = rec_attr(t->ap, S_wake);
    if (wake == NULL)
        return -1;
    PyObject *is = PyObject_CallMethodNoArgs(wake, S_is_set);
    int set = is == NULL ? -1 : PyObject_IsTrue(is);
    Py_XDECREF(is);
    if (set == 0) {
        PyObject *w = PyObject_CallMethodNoArgs(wake, S_set);
        set = w == NULL ? -1 : 1;
        Py_XDECREF(w);
    }
    Py_DECREF(wake);
    return set < 0 ? -1 : 0;
}

/* tracer/tags.py's presets without the regex engine (the same matches: tests/tracer/test_tags.py):
   sglang  (?P<request>-?\d+)_(?:kv|aux|state)(?:_.*)?\Z
   vllm    (?P<request>.+):(?P<world>\d+)\Z            (DOTALL, re.match: anchored at the start)
   the request decoded as bytes.decode(errors="replace"); NULL and no error: no match */
enum { TAG_SGLANG = 1, TAG_VLLM = 2 };

static PyObject *tag_sglang(const char *b, Py_ssize_t n) {
    Py_ssize_t i = b[0] == '-' ? 1 : 0, d = i;
    while (i < n && b[i] >= '0' && b[i] <= '9')
        i++;
    if (i == d || i >= n || b[i] != '_')
        return NULL;
    Py_ssize_t end = i, k = i + 1, rest = n - k;
    static const char *const kinds[3] = {"kv", "aux", "state"};
    for (int j = 0; j < 3; j++) {
        Py_ssize_t len = (Py_ssize_t)strlen(kinds[j]);
        if (rest >= len && memcmp(b + k, kinds[j], (size_t)len) == 0 && (rest == len || b[k + len] == '_'))
            return PyUnicode_DecodeUTF8(b, end, "replace");
    }
    return NULL;
}

static PyObject *tag_vllm(const char *b, Py_ssize_t n) {
    Py_ssize_t i = n;
    while (i > 0 && b[i - 1] >= '0' && b[i - 1] <= '9')
        i--;
    if (i == n || i < 2 || b[i - 1] != ':')   /* digits to the end, after a ':' with something before it */
        return NULL;
    return PyUnicode_DecodeUTF8(b, i - 1, "replace");
}

static PyObject *tag_native(int mode, const char *b, Py_ssize_t n) {
    PyObject *r = NULL;
    if (n > 0 && (mode & TAG_SGLANG))
        r = tag_sglang(b, n);
    if (r == NULL && !PyErr_Occurred() && n > 0 && (mode & TAG_VLLM))
        r = tag_vllm(b, n);
    if (r == NULL && !PyErr_Occurred())
        r = Py_NewRef(Py_None);
    return r;
}

/* parse(msg) for a true msg: in C for the presets' parser and a bytes msg */
static PyObject *tag_of(TapObject *t, PyObject *msg) {
    if (t->tags && PyBytes_CheckExact(msg))
        return tag_native(t->tags, PyBytes_AS_STRING(msg), PyBytes_GET_SIZE(msg));
    return PyObject_CallOneArg(t->parse, msg);
}

/* tag_parse(presets, msg): what tag_of gives for a parser of those presets (tests) */
static PyObject *tag_parse(PyObject *self, PyObject *args) {
    int mode;
    const char *b;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "iy#:tag_parse", &mode, &b, &n))
        return NULL;
    return tag_native(mode, b, n);
}

/* the preset bits of a tags.make_parser parser (its ``presets``), 0: another callable */
static int tag_mode(PyObject *parse) {
    if (parse == Py_None)
        return 0;
    PyObject *names = PyObject_GetAttrString(parse, "presets");
    if (names == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError))
            return -1;
        PyErr_Clear();
    }
    int mode = 0;
    if (names != NULL && PyTuple_Check(names)) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
            PyObject *x = PyTuple_GET_ITEM(names, i);
            int bit = !PyUnicode_Check(x) ? 0 : PyUnicode_CompareWithASCIIString(x, "sglang") == 0 ? TAG_SGLANG
                      : PyUnicode_CompareWithASCIIString(x, "vllm") == 0                         ? TAG_VLLM
                                                                                                  : 0;
            /* only the order sglang-then-vllm (the one tag_native tries) */
            if (bit == 0 || (bit == TAG_SGLANG && (mode & TAG_VLLM))) {
                mode = 0;
                break;
            }
            mode |= bit;
        }
    }
    Py_XDECREF(names);
    return mode;
}

static PyObject *tap_post(TapObject *t, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames)) || nargs < 1)
        return py_method(t, 0, args, nargs, kwnames);
    PyObject *handle = args[0], *notif = nargs > 1 ? args[1] : EMPTY_BYTES;
    PyObject *small_[8], **call = small_;  /* (handle, notif, *rest) for NIXL */
    Py_ssize_t ncall = nargs > 1 ? nargs : 2;
    if (ncall > 8 && (call = PyMem_Malloc((size_t)ncall * sizeof(PyObject *))) == NULL)
        return PyErr_NoMemory();
    call[0] = handle, call[1] = notif;
    for (Py_ssize_t i = 2; i < nargs; i++)
        call[i] = args[i];
    PyObject *status = NULL, *msg = NULL, *req = NULL, *xid = NULL, *hashes = NULL;
    TapHandleObject *H = handle_of(t, handle);
    if (H == NULL && PyErr_Occurred())
        goto done;
    int closed = rec_closed(t);
    if (closed < 0)
        goto done;
    if (H == NULL || closed) {  /* NIXL still moves the bytes; the trace says how many postings it did not see */
        PyObject *reason = CONST(t, closed ? C_CLOSED : C_UNTRACED);
        if (!closed && (reason = PyDict_GetItemWithError(t->untraced, handle)) == NULL) {
            if (PyErr_Occurred())
                goto done;
            reason = CONST(t, C_UNTRACED);
        }
        PyObject *r = PyObject_CallMethodOneArg(t->ap->rec, S_untraced, reason);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
        status = inner_call(t, S_postXferReq, call, ncall);
        goto done;
    }
    int given = PyObject_IsTrue(notif);  /* an empty message keeps the one given at creation */
    if (given < 0 || (msg = given ? as_bytes(notif) : Py_NewRef(OR_NONE(H->notif))) == NULL)
        goto done;
    if ((req = request_of(t->ap, NULL)) == NULL)
        goto done;
    if (req == Py_None) {
        int m = PyObject_IsTrue(msg);
        if (m < 0)
            goto done;
        if (m) {
            PyObject *seen = PySequence_GetItem(OR_NONE(H->tagged), 0);
            if (seen == NULL)
                goto done;
            int ne = PyObject_RichCompareBool(seen, msg, Py_NE);
            Py_DECREF(seen);
            if (ne < 0)
                goto done;
            if (ne) {
                PyObject *parsed = t->parse == Py_None ? Py_NewRef(Py_None) : tag_of(t, msg);
                if (parsed == NULL)
                    goto done;
                PyObject *pair = PyTuple_Pack(2, msg, parsed);
                Py_DECREF(parsed);
                if (pair == NULL)
                    goto done;
                Py_XSETREF(H->tagged, pair);
            }
            Py_SETREF(req, PySequence_GetItem(OR_NONE(H->tagged), 1));
            if (req == NULL)
                goto done;
        }
    }
    if (t->xfer_ids != Py_None) {
        xid = Py_TYPE(t->xfer_ids)->tp_iternext(t->xfer_ids);
        if (xid == NULL && !PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "the recorder's transfer id counter ended");
    } else {
        xid = PyObject_CallMethodNoArgs(t->ap->rec, S_new_xfer_id);
    }
    if (xid == NULL)
        goto done;
    if (t->plain_descs) {
        if (descs_posted(t, xid, OR_NONE(H->descs)) < 0)
            goto done;
    } else {
        PyObject *da[] = {t->ap->rec, xid, OR_NONE(H->descs)};
        PyObject *r = PyObject_VectorcallMethod(S_descs_posted, da, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
    }
    int none = no_hasher(t);
    if (none < 0 || (hashes = none ? Py_NewRef(ZERO) : PyObject_CallMethodNoArgs(t->ap->rec, S_hash_mark)) == NULL)
        goto done;
    /* the posting's state, with no Python code in between (the tap's lock in Python) */
    Py_XSETREF(H->xfer, Py_NewRef(xid));
    Py_XSETREF(H->request, Py_NewRef(req));
    Py_XSETREF(H->terminal, Py_NewRef(Py_False));
    Py_XSETREF(H->hashes, Py_NewRef(hashes));
    {
        int m = PyObject_IsTrue(msg);
        if (m < 0)
            goto done;
        PyObject *v[9] = {CONST(t, C_POST), t->name, req, xid, H->remote, H->total, m ? msg : NULL, NULL, H->detail};
        PyObject *seq = nixl_row(t->ap, v);
        if (seq == NULL)
            goto done;
        Py_DECREF(seq);
    }
    status = inner_call(t, S_postXferReq, call, ncall);
    if (status == NULL) {  /* NIXL raises on failures found at post (e.g. peer disconnected) */
        failed(t, handle, H);
        goto done;
    }
    int ne = PyObject_RichCompareBool(status, t->in_prog, Py_NE);
    if (ne < 0 || (ne && terminal(t, handle, H, status, NULL) < 0))
        Py_CLEAR(status);
done:
    if (call != small_)
        PyMem_Free(call);
    Py_XDECREF(H);
    Py_XDECREF(msg);
    Py_XDECREF(req);
    Py_XDECREF(xid);
    Py_XDECREF(hashes);
    return status;
}

static PyObject *tap_status(TapObject *t, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames)) || nargs != 1)
        return py_method(t, 1, args, nargs, kwnames);
    PyObject *handle = args[0];
    PyObject *status = inner_call(t, S_getXferStatus, args, 1);
    if (status == NULL) {  /* NIXL 1.x raises instead of returning an error status */
        PyObject *type, *val, *tb;
        PyErr_Fetch(&type, &val, &tb);
        TapHandleObject *H = handle_of(t, handle);
        if (H == NULL && PyErr_Occurred()) {
            Py_XDECREF(type);
            Py_XDECREF(val);
            Py_XDECREF(tb);
            return NULL;
        }
        PyErr_Restore(type, val, tb);
        failed(t, handle, H);
        Py_XDECREF(H);
        return NULL;
    }
    int ne = PyObject_RichCompareBool(status, t->in_prog, Py_NE);
    if (ne < 0)
        goto fail;
    if (ne) {
        TapHandleObject *H = handle_of(t, handle);
        if (H == NULL && PyErr_Occurred())
            goto fail;
        int rc = 0;
        if (H != NULL) {
            int done = PyObject_IsTrue(OR_NONE(H->terminal));
            rc = done < 0 ? -1 : done ? 0 : terminal(t, handle, H, status, NULL);
            Py_DECREF(H);
        }
        if (rc < 0)
            goto fail;
    }
    return status;
fail:
    Py_DECREF(status);
    return NULL;
}

/* d.pop(key, None): *out the value (new reference) or NULL */
static int dict_pop(PyObject *d, PyObject *key, PyObject **out) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL)
        return PyErr_Occurred() ? -1 : 0;
    Py_INCREF(v);
    if (PyDict_DelItem(d, key) < 0) {
        Py_DECREF(v);
        return -1;
    }
    if (out != NULL)
        *out = v;
    else
        Py_DECREF(v);
    return 0;
}

static PyObject *tap_release(TapObject *t, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames)) || nargs != 1)
        return py_method(t, 2, args, nargs, kwnames);
    PyObject *handle = args[0];
    PyObject *out = inner_call(t, S_releaseXferReq, args, 1);
    if (out == NULL)
        return NULL;
    PyObject *H = NULL;
    if (dict_pop(t->handles, handle, &H) < 0 || dict_pop(t->untraced, handle, NULL) < 0)
        goto fail;
    if (H != NULL && !PyObject_TypeCheck(H, &TapHandleType)) {
        PyErr_SetString(PyExc_TypeError, "the tap's handles must be TapHandle objects");
        goto fail;
    }
    TapHandleObject *h = (TapHandleObject *)H;
    if (h != NULL && OR_NONE(h->xfer) != Py_None) {
        int closed = rec_closed(t);
        if (closed < 0)
            goto fail;
        if (!closed) {
            PyObject *v[9] = {CONST(t, C_RELEASE), t->name, h->request, h->xfer, h->remote, NULL, NULL, NULL, NULL};
            PyObject *seq = nixl_row(t->ap, v);
            if (seq == NULL)
                goto fail;
            Py_DECREF(seq);
        }
    }
    Py_XDECREF(H);
    return out;
fail:
    Py_XDECREF(H);
    Py_DECREF(out);
    return NULL;
}

static PyObject *tap_notifs(TapObject *t, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames)) || nargs < 1)
        return py_method(t, 3, args, nargs, kwnames);
    PyObject *map = args[0], *before = NULL, *out = NULL, *items = NULL, *peer_name = NULL, *msgs = NULL,
             *it = NULL, *m = NULL, *req = NULL;
    int any = PyObject_IsTrue(map);
    if (any < 0)
        return NULL;
    if (any) {  /* messages already in the map are not new */
        PyObject *have = PyMapping_Items(map);
        if (have == NULL || (before = PyDict_New()) == NULL) {
            Py_XDECREF(have);
            return NULL;
        }
        for (Py_ssize_t i = 0, n = PyList_GET_SIZE(have); i < n; i++) {
            PyObject *kv = PyList_GET_ITEM(have, i);
            if (!PyTuple_Check(kv) || PyTuple_GET_SIZE(kv) != 2) {
                PyErr_SetString(PyExc_TypeError, "items() must give (key, value) pairs");
                goto fail_have;
            }
            Py_ssize_t len = PyObject_Size(PyTuple_GET_ITEM(kv, 1));
            PyObject *l = len < 0 ? NULL : PyLong_FromSsize_t(len);
            if (l == NULL || PyDict_SetItem(before, PyTuple_GET_ITEM(kv, 0), l) < 0) {
                Py_XDECREF(l);
                goto fail_have;
            }
            Py_DECREF(l);
        }
        Py_DECREF(have);
        goto call;
    fail_have:
        Py_DECREF(have);
        Py_DECREF(before);
        return NULL;
    }
call:
    out = inner_call(t, S_getNotifs, args, nargs);
    if (out == NULL)
        goto fail;
    int got = PyObject_IsTrue(out);
    if (got < 0)
        goto fail;
    if (!got)
        goto done;
    int closed = rec_closed(t);
    if (closed < 0)
        goto fail;
    if (closed)
        goto done;
    if ((items = PyMapping_Items(out)) == NULL)
        goto fail;
    for (Py_ssize_t i = 0, n = PyList_GET_SIZE(items); i < n; i++) {
        PyObject *kv = PyList_GET_ITEM(items, i);
        if (!PyTuple_Check(kv) || PyTuple_GET_SIZE(kv) != 2) {
            PyErr_SetString(PyExc_TypeError, "items() must give (key, value) pairs");
            goto fail;
        }
        PyObject *peer = PyTuple_GET_ITEM(kv, 0);
        msgs = Py_NewRef(PyTuple_GET_ITEM(kv, 1));
        if (before != NULL) {  /* one notif_recv per new message */
            PyObject *k = PyDict_GetItemWithError(before, peer);
            Py_ssize_t from = 0;
            if (k == NULL && PyErr_Occurred())
                goto fail;
            if (k != NULL && (from = PyLong_AsSsize_t(k)) == -1 && PyErr_Occurred())
                goto fail;
            PyObject *newer = PySequence_GetSlice(msgs, from, PY_SSIZE_T_MAX);
            if (newer == NULL)
                goto fail;
            Py_SETREF(msgs, newer);
        }
        if ((it = PyObject_GetIter(msgs)) == NULL)
            goto fail;
        while ((m = PyIter_Next(it)) != NULL) {
            if (peer_name == NULL && (peer_name = agent_name(peer)) == NULL)
                goto fail;
            if ((req = request_of(t->ap, NULL)) == NULL)
                goto fail;
            if (req == Py_None && t->parse != Py_None) {
                int nonempty = PyObject_IsTrue(m);
                if (nonempty < 0)
                    goto fail;
                if (nonempty) {
                    Py_SETREF(req, tag_of(t, m));
                    if (req == NULL)
                        goto fail;
                }
            }
            PyObject *v[9] = {CONST(t, C_RECV), t->name, req, NULL, peer_name, NULL, m, NULL, NULL};
            PyObject *seq = nixl_row(t->ap, v);
            if (seq == NULL)
                goto fail;
            Py_DECREF(seq);
            Py_CLEAR(req);
            Py_CLEAR(m);
        }
        if (PyErr_Occurred())
            goto fail;
        Py_CLEAR(it);
        Py_CLEAR(msgs);
        Py_CLEAR(peer_name);
    }
done:
    Py_XDECREF(before);
    Py_XDECREF(items);
    return out;
fail:
    Py_XDECREF(before);
    Py_XDECREF(items);
    Py_XDECREF(out);
    Py_XDECREF(peer_name);
    Py_XDECREF(msgs);
    Py_XDECREF(it);
    Py_XDECREF(m);
    Py_XDECREF(req);
    return NULL;
}

/* a 1-D buffer of integers (any stride) of kind 'i' (signed, 4 or 8 bytes: indices), 'u' (unsigned,
   8 bytes: addresses, sizes) or 'd' (signed, 4 bytes: devices); 0 (no error): not one */
static int int_view(PyObject *o, Py_buffer *v, char kind) {
    if (!PyObject_CheckBuffer(o))
        return 0;
    if (PyObject_GetBuffer(o, v, PyBUF_RECORDS_RO) < 0) {
        PyErr_Clear();
        return 0;
    }
    const char *f = v->format != NULL ? v->format : "B";
#if PY_LITTLE_ENDIAN
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
#else
    if (*f == '@' || *f == '=' || *f == '>' || *f == '!')
        f++;
#endif
    int sig4 = v->itemsize == 4 && (*f == 'i' || *f == 'l'), sig8 = v->itemsize == 8 && (*f == 'l' || *f == 'q');
    int ok = v->ndim == 1 && f[0] != 0 && f[1] == 0 &&
             (kind == 'i' ? sig4 || sig8 : kind == 'd' ? sig4 : v->itemsize == 8 && (*f == 'L' || *f == 'Q'));
    if (!ok)
        PyBuffer_Release(v);
    return ok;
}

static inline int64_t int_at(const Py_buffer *v, Py_ssize_t i) {
    const char *p = (const char *)v->buf + i * v->strides[0];
    if (v->itemsize == 4) {
        int32_t x;
        memcpy(&x, p, 4);
        return x;
    }
    int64_t x;
    memcpy(&x, p, 8);
    return x;
}

/* np.empty(n, dtype) (items of `size` bytes) and its writable buffer */
static PyObject *np_empty(TapObject *t, Py_ssize_t n, PyObject *dtype, Py_ssize_t size, Py_buffer *v) {
    PyObject *len = PyLong_FromSsize_t(n);
    if (len == NULL)
        return NULL;
    PyObject *args[] = {len, dtype};
    PyObject *a = PyObject_Vectorcall(t->empty, args, 2, NULL);
    Py_DECREF(len);
    if (a == NULL)
        return NULL;
    if (PyObject_GetBuffer(a, v, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        Py_DECREF(a);
        return NULL;
    }
    if (v->len != n * size) {
        PyBuffer_Release(v);
        Py_DECREF(a);
        PyErr_SetString(PyExc_RuntimeError, "np.empty gave an unexpected buffer");
        return NULL;
    }
    return a;
}

/* column src (a buffer of `kind`, m entries) at the indices iv (all in [0, m)), as a new array of
   dtype; *sum: the sum of the values (unsigned, wrapping as numpy's uint64 sum) when not NULL;
   NULL and no error: src is not such a buffer */
static PyObject *gather(TapObject *t, PyObject *src, const Py_buffer *iv, char kind, PyObject *dtype, Py_ssize_t m,
                        uint64_t *sum) {
    Py_buffer sv, ov;
    if (!int_view(src, &sv, kind))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t n = iv->shape[0];
    if (sv.shape[0] == m && (out = np_empty(t, n, dtype, sv.itemsize, &ov)) != NULL) {
        uint64_t acc = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            const char *p = (const char *)sv.buf + int_at(iv, i) * sv.strides[0];
            if (sv.itemsize == 8) {
                uint64_t x;
                memcpy(&x, p, 8);
                ((uint64_t *)ov.buf)[i] = x;
                acc += x;
            } else {
                memcpy((char *)ov.buf + 4 * i, p, 4);
            }
        }
        if (sum != NULL)
            *sum = acc;
        PyBuffer_Release(&ov);
    }
    PyBuffer_Release(&sv);
    return out;
}

/* Take(col, idx): a column of a posting's descriptors not gathered yet -- ``col``'s entries at
   the indices ``idx`` (bytes of native int64, each in range of col), or the indices themselves
   when col is None. makeXferReq keeps its handle's addresses and indices so (one bytes copy of
   the indices, no numpy array per handle: the engine's thread); the recorder's flush
   (_descs_batch) gathers a batch's columns with take_into, one array per column. col is a
   prepared list's column (tap-owned, never written after prepXferDlist). */
typedef struct {
    PyObject_HEAD
    PyObject *col, *idx;
} TakeObject;

static void take_dealloc(TakeObject *k) {
    Py_XDECREF(k->col);
    Py_XDECREF(k->idx);
    Py_TYPE(k)->tp_free((PyObject *)k);
}

static PyObject *take_get_col(TakeObject *k, void *c) { return Py_NewRef(OR_NONE(k->col)); }
static PyObject *take_get_idx(TakeObject *k, void *c) { return Py_NewRef(k->idx); }
static Py_ssize_t take_len(TakeObject *k) { return PyBytes_GET_SIZE(k->idx) / 8; }

static PyGetSetDef take_getset[] = {{"col", (getter)take_get_col, NULL, "the column gathered (None: the indices)", NULL},
                                    {"idx", (getter)take_get_idx, NULL, "the indices, native int64 bytes", NULL},
                                    {NULL}};
static PySequenceMethods take_seq = {.sq_length = (lenfunc)take_len};

static PyTypeObject TakeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kvtrace.tracer._rows.Take",
    .tp_basicsize = sizeof(TakeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a descriptor column of a posting, gathered at flush (take_into)",
    .tp_dealloc = (destructor)take_dealloc,
    .tp_getset = take_getset,
    .tp_as_sequence = &take_seq,
};

static PyObject *take_new(PyObject *col, PyObject *idx) {
    TakeObject *k = PyObject_New(TakeObject, &TakeType);
    if (k == NULL)
        return NULL;
    k->col = col == NULL || col == Py_None ? NULL : Py_NewRef(col);
    k->idx = Py_NewRef(idx);
    return (PyObject *)k;
}

/* take_into(takes, out): every Take of the sequence gathered, one after the other, into out (a
   writable contiguous buffer of 8-byte items: addresses, sizes, indices; or 4-byte: devices) that
   they fill exactly; False (out untouched): some item is not a Take */
static PyObject *take_into(PyObject *self, PyObject *args) {
    PyObject *vals, *out;
    if (!PyArg_ParseTuple(args, "OO:take_into", &vals, &out))
        return NULL;
    PyObject *seq = PySequence_Fast(vals, "take_into: a sequence of Take expected");
    if (seq == NULL)
        return NULL;
    Py_ssize_t nv = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < nv; i++)
        if (Py_TYPE(items[i]) != &TakeType) {
            Py_DECREF(seq);
            Py_RETURN_FALSE;
        }
    Py_buffer ov;
    if (PyObject_GetBuffer(out, &ov, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t size = ov.itemsize, total = size > 0 ? ov.len / size : 0, pos = 0;
    const char *err = NULL;
    if (size != 8 && size != 4)
        err = "take_into: 4- or 8-byte items expected";
    for (Py_ssize_t i = 0; err == NULL && i < nv; i++) {
        TakeObject *k = (TakeObject *)items[i];
        Py_ssize_t n = PyBytes_GET_SIZE(k->idx) / 8;
        const char *ip = PyBytes_AS_STRING(k->idx);
        if (n > total - pos) {
            err = "take_into: the takes overrun the output";
            break;
        }
        char *op = (char *)ov.buf + pos * size;
        if (k->col == NULL) {
            if (size != 8)
                err = "take_into: indices are 8-byte items";
            else
                memcpy(op, ip, (size_t)n * 8);
        } else {
            Py_buffer sv;
            if (!int_view(k->col, &sv, size == 8 ? 'u' : 'd')) {
                err = PyErr_Occurred() ? "" : "take_into: a column of another type";
                break;
            }
            for (Py_ssize_t j = 0; j < n; j++) {
                int64_t x;
                memcpy(&x, ip + 8 * j, 8);
                if (x < 0 || x >= sv.shape[0]) {
                    err = "take_into: an index out of its column";
                    break;
                }
                memcpy(op + j * size, (const char *)sv.buf + x * sv.strides[0], (size_t)size);
            }
            PyBuffer_Release(&sv);
        }
        pos += n;
    }
    if (err == NULL && pos != total)
        err = "take_into: the takes do not fill the output";
    PyBuffer_Release(&ov);
    Py_DECREF(seq);
    if (err != NULL) {
        if (*err)
            PyErr_SetString(PyExc_ValueError, err);
        return NULL;
    }
    Py_RETURN_TRUE;
}

/* one side of a prepped posting: out[0..3] = the indices (Take(None, idx): int64 bytes), the list's
   addresses at them (Take(addresses, idx): gathered at flush), their sizes and devices (these two
   only where the list has no one value for all: the _Dlist's size / dev None, gathered here into
   arrays; *total then the sizes' sum); 1, or 0: not a case handled here (the caller's Python does
   it), -1: error. dl: the side's _Dlist. */
static int side(TapObject *t, PyObject *dl, PyObject *idx, int sizes, int devs, PyObject **out, uint64_t *total) {
    static PyObject *S_descs_ = NULL;
    if (S_descs_ == NULL && (S_descs_ = PyUnicode_InternFromString("descs")) == NULL)
        return -1;
    Py_buffer iv;
    if (!int_view(idx, &iv, 'i'))
        return 0;
    int rc = -1;
    PyObject *descs = PyObject_GetAttr(dl, S_descs_), *col[3] = {NULL, NULL, NULL};
    if (descs == NULL)
        goto out;
    for (int c = 0; c < 3; c++)
        if ((col[c] = PySequence_GetItem(descs, c)) == NULL)
            goto out;
    Py_ssize_t n = iv.shape[0], m = PyObject_Length(col[0]);
    if (m < 0)
        goto out;
    rc = 0;
    for (Py_ssize_t i = 0; i < n; i++) {  /* NIXL's rule (a negative index, numpy's from the end: in Python) */
        int64_t k = int_at(&iv, i);
        if (k < 0 || k >= (int64_t)m)
            goto out;
    }
    {  /* the addresses: a buffer of m unsigned 8-byte entries, else the Python path */
        Py_buffer av;
        if (!int_view(col[0], &av, 'u'))
            goto out;
        int fits = av.shape[0] == m;
        PyBuffer_Release(&av);
        if (!fits)
            goto out;
    }
    PyObject *ib = PyBytes_FromStringAndSize(NULL, n * 8);
    if (ib == NULL) {
        rc = -1;
        goto out;
    }
    int64_t *ip = (int64_t *)PyBytes_AS_STRING(ib);
    for (Py_ssize_t i = 0; i < n; i++)
        ip[i] = int_at(&iv, i);
    out[0] = take_new(NULL, ib);
    out[1] = out[0] == NULL ? NULL : take_new(col[0], ib);
    Py_DECREF(ib);
    if (out[1] == NULL) {
        rc = -1;
        goto out;
    }
    if ((sizes && (out[2] = gather(t, col[1], &iv, 'u', t->u64, m, total)) == NULL) ||
        (devs && (out[3] = gather(t, col[2], &iv, 'd', t->i32, m, NULL)) == NULL)) {
        rc = PyErr_Occurred() ? -1 : 0;
        goto out;
    }
    rc = 1;
out:
    PyBuffer_Release(&iv);
    Py_XDECREF(descs);
    for (int c = 0; c < 3; c++)
        Py_XDECREF(col[c]);
    if (rc != 1)
        for (int c = 0; c < 4; c++)
            Py_CLEAR(out[c]);
    return rc;
}

/* inner.meth(*args) with the notification message at position ``at`` (``notif``: the given one, or
   b"" when the call stopped before it), as the Python methods pass it on */
static PyObject *inner_with_notif(TapObject *t, PyObject *meth, PyObject *const *args, Py_ssize_t nargs,
                                  Py_ssize_t at, PyObject *notif) {
    PyObject *small_[10], **call = small_;
    Py_ssize_t ncall = nargs > at + 1 ? nargs : at + 1;
    if (ncall > 10 && (call = PyMem_Malloc((size_t)ncall * sizeof(PyObject *))) == NULL)
        return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < ncall; i++)
        call[i] = i == at ? notif : args[i];
    PyObject *handle = inner_call(t, meth, call, ncall);
    if (call != small_)
        PyMem_Free(call);
    return handle;
}

/* handles[handle] = TapHandle(op, remote, msg, descs, detail, total); -1: error */
static int keep_handle(TapObject *t, PyObject *handle, PyObject *op, PyObject *remote, PyObject *msg, PyObject *descs,
                       PyObject *detail, PyObject *total) {
    PyObject *hargs = PyTuple_Pack(6, op, remote, msg, descs, detail, total);
    if (hargs == NULL)
        return -1;
    PyObject *H = th_new(&TapHandleType, hargs, NULL);
    Py_DECREF(hargs);
    int rc = H == NULL ? -1 : PyDict_SetItem(t->handles, handle, H);
    Py_XDECREF(H);
    return rc;
}

/* agent_tap._bytes */
static PyObject *msg_bytes(PyObject *msg) {
    int given = PyObject_IsTrue(msg);
    if (given < 0)
        return NULL;
    return given || PyUnicode_Check(msg) ? as_bytes(msg) : Py_NewRef(EMPTY_BYTES);
}

/* BindingTap._prepped in C: both lists seen, index arrays of int32/int64 in range, the lists'
   columns integer buffers; 0: not that case */
static int prepped(TapObject *t, PyObject *handle, PyObject *op, PyObject *L, PyObject *R, PyObject *li_in,
                   PyObject *ri_in, PyObject *notif) {
    static PyObject *names[6] = {NULL};  /* id, text, agent, uniform, size, dev */
    if (names[0] == NULL) {
        static const char *const nm[6] = {"id", "text", "agent", "uniform", "size", "dev"};
        if (intern_all(names, nm, 6) < 0)
            return -1;
    }
    PyObject *lv[6] = {NULL}, *rv[6] = {NULL}, *lc[4] = {NULL}, *rc_[4] = {NULL}, *op_ = NULL, *hex = NULL,
             *detail = NULL, *total = NULL, *n = NULL, *descs = NULL, *msg = NULL;
    int rc = -1;
    for (int i = 0; i < 6; i++)
        if ((lv[i] = PyObject_GetAttr(L, names[i])) == NULL || (rv[i] = PyObject_GetAttr(R, names[i])) == NULL)
            goto out;
    uint64_t lsum = 0, rsum = 0;
    int got = side(t, L, li_in, lv[4] == Py_None, lv[5] == Py_None, lc, &lsum);
    if (got > 0)
        got = side(t, R, ri_in, rv[4] == Py_None, rv[5] == Py_None, rc_, &rsum);
    if (got <= 0) {
        rc = got;
        goto out;
    }
    /* each side's (addresses, sizes, devices): sizes and devices one 0-d value when every entry of
       its list shares it */
    PyObject *lsz = lc[2] != NULL ? lc[2] : lv[4], *ldev = lc[3] != NULL ? lc[3] : lv[5];
    PyObject *rsz = rc_[2] != NULL ? rc_[2] : rv[4], *rdev = rc_[3] != NULL ? rc_[3] : rv[5];
    int write = PyObject_RichCompareBool(op, t->write, Py_EQ);
    if (write < 0)
        goto out;
    op_ = Py_NewRef(CONST(t, write ? C_WRITE : C_READ));
    if ((hex = PyNumber_ToBase(handle, 16)) == NULL ||
        (detail = PyUnicode_FromFormat("{\"handle\": \"%U\", \"prepped\": true}", hex)) == NULL)
        goto out;
    Py_ssize_t nl = PyObject_Length(lc[0]), nr = PyObject_Length(rc_[0]);
    if (nl < 0 || nr < 0 || (n = PyLong_FromSsize_t(write ? nl : nr)) == NULL)
        goto out;
    if (lv[3] != Py_None) {  /* L.uniform * len(li), else the sizes' sum */
        PyObject *count = PyLong_FromSsize_t(nl);
        if (count == NULL)
            goto out;
        total = PyNumber_Multiply(lv[3], count);
        Py_DECREF(count);
    } else {
        total = PyLong_FromUnsignedLongLong(lsum);
    }
    if (total == NULL)
        goto out;
    /* _handle_descs: src/dst is the direction the bytes move, whoever initiated */
    if (write)
        descs = PyTuple_Pack(13, op_, t->text, rv[1], lc[1], rc_[1], lsz, ldev, rdev, lv[0], lc[0], rv[0], rc_[0], n);
    else
        descs = PyTuple_Pack(13, op_, rv[1], t->text, rc_[1], lc[1], rsz, rdev, ldev, rv[0], rc_[0], lv[0], lc[0], n);
    if (descs == NULL || (msg = msg_bytes(notif)) == NULL)
        goto out;
    if (keep_handle(t, handle, op_, rv[2], msg, descs, detail, total) < 0)
        goto out;
    rc = 1;
out:
    for (int i = 0; i < 6; i++) {
        Py_XDECREF(lv[i]);
        Py_XDECREF(rv[i]);
    }
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(lc[i]);
        Py_XDECREF(rc_[i]);
    }
    Py_XDECREF(op_);
    Py_XDECREF(hex);
    Py_XDECREF(detail);
    Py_XDECREF(total);
    Py_XDECREF(n);
    Py_XDECREF(descs);
    Py_XDECREF(msg);
    return rc;
}

static PyObject *tap_make(TapObject *t, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames)) || nargs < 5)
        return py_method(t, 4, args, nargs, kwnames);
    PyObject *notif = nargs > 5 ? args[5] : EMPTY_BYTES;  /* (op, local_h, local_idx, remote_h, remote_idx, notif, *rest) */
    PyObject *handle = inner_with_notif(t, S_makeXferReq, args, nargs, 5, notif);
    if (handle == NULL)
        return NULL;
    PyObject *L = PyDict_GetItemWithError(t->dlists, args[1]), *R = NULL;
    if (L == NULL && PyErr_Occurred())
        goto fail;
    if (L != NULL && (R = PyDict_GetItemWithError(t->dlists, args[3])) == NULL && PyErr_Occurred())
        goto fail;
    int done = 0;
    if (L != NULL && R != NULL) {
        Py_INCREF(L);
        Py_INCREF(R);
        done = prepped(t, handle, args[0], L, R, args[2], args[4], notif);
        Py_DECREF(L);
        Py_DECREF(R);
        if (done < 0)
            goto fail;
    }
    if (!done) {  /* the rest (lists of other kinds, lists prepared before tracing): in Python */
        PyObject *pa[] = {t->pytap, handle, args[0], args[1], args[2], args[3], args[4], notif};
        PyObject *r = PyObject_VectorcallMethod(S_prepped, pa, 8 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
    }
    return handle;
fail:
    Py_DECREF(handle);
    return NULL;
}

/* one side of an initialize_xfer posting whose list get_xfer_descs made of an Nx3 array (the tap's
   _made: id(list) -> (list, a copy of its rows, memory type), popped here), checked against the
   list's first and last entry as agent_descs.array_descs does: out[0..2] = new arrays of its
   addresses, sizes (uint64) and devices (int32: the low 32 bits), *total the sizes' sum (wrapping
   as numpy's uint64 sum), *count the entries. 1, 0: not that case (the caller reads the list back),
   -1: error. */
static int made_side(TapObject *t, PyObject *made, PyObject *dl, PyObject **out, uint64_t *total, Py_ssize_t *count) {
    PyObject *key = PyLong_FromVoidPtr(dl);
    if (key == NULL)
        return -1;
    PyObject *e = PyDict_GetItemWithError(made, key);
    if (e == NULL) {
        Py_DECREF(key);
        return PyErr_Occurred() ? -1 : 0;
    }
    Py_INCREF(e);
    int rc = PyDict_DelItem(made, key) < 0 ? -1 : 0;
    Py_DECREF(key);
    Py_buffer rv, av, sv, dv;
    int have_rows = 0;
    PyObject *ends[2] = {NULL, NULL};
    if (rc < 0 || !PyTuple_Check(e) || PyTuple_GET_SIZE(e) < 2 || PyTuple_GET_ITEM(e, 0) != dl)
        goto out;
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(e, 1), &rv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        goto out;
    }
    have_rows = 1;
    const char *f = rv.format != NULL ? rv.format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if (rv.ndim != 2 || rv.shape[1] != 3 || rv.itemsize != 8 || rv.shape[0] < 1 || f[1] != '\0' ||
        strchr("lqLQ", f[0]) == NULL)
        goto out;
    Py_ssize_t n = rv.shape[0];
    const uint64_t *r = (const uint64_t *)rv.buf;
    for (int k = 0; k < 2; k++) {  /* the list holds these rows: its first and last entry */
        Py_ssize_t i = k == 0 ? 0 : n - 1;
        if ((ends[k] = PySequence_GetItem(dl, i)) == NULL) {
            PyErr_Clear();
            goto out;
        }
        if (!PyTuple_Check(ends[k]) || PyTuple_GET_SIZE(ends[k]) < 3)
            goto out;
        uint64_t want[3] = {r[3 * i], r[3 * i + 1], r[3 * i + 2] & 0xFFFFFFFFu};
        for (int c = 0; c < 3; c++) {
            PyObject *v = PyTuple_GET_ITEM(ends[k], c);
            uint64_t x = PyLong_Check(v) ? PyLong_AsUnsignedLongLong(v) : (uint64_t)-1;
            if (x == (uint64_t)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                goto out;
            }
            if (!PyLong_Check(v) || x != want[c])
                goto out;
        }
    }
    rc = -1;
    if ((out[0] = np_empty(t, n, t->u64, 8, &av)) == NULL)
        goto out;
    if ((out[1] = np_empty(t, n, t->u64, 8, &sv)) == NULL) {
        PyBuffer_Release(&av);
        goto out;
    }
    if ((out[2] = np_empty(t, n, t->i32, 4, &dv)) == NULL) {
        PyBuffer_Release(&av);
        PyBuffer_Release(&sv);
        goto out;
    }
    uint64_t *a = (uint64_t *)av.buf, *z = (uint64_t *)sv.buf, acc = 0;
    int32_t *d = (int32_t *)dv.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        a[i] = r[3 * i];
        z[i] = r[3 * i + 1];
        acc += z[i];
        d[i] = (int32_t)(uint32_t)(r[3 * i + 2] & 0xFFFFFFFFu);
    }
    PyBuffer_Release(&av);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&dv);
    *total = acc;
    *count = n;
    rc = 1;
out:
    if (have_rows)
        PyBuffer_Release(&rv);
    Py_XDECREF(ends[0]);
    Py_XDECREF(ends[1]);
    Py_DECREF(e);
    if (rc != 1)
        for (int c = 0; c < 3; c++)
            Py_CLEAR(out[c]);
    return rc;
}

/* BindingTap.createXferReq (initialize_xfer) in C when get_xfer_descs made both lists of Nx3
   arrays (made_side), else NIXL's call here and the rest in pytap._created (the lists read back) */
static PyObject *tap_create(TapObject *t, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    static PyObject *S_made = NULL, *S_created = NULL;
    if (S_made == NULL && ((S_made = PyUnicode_InternFromString("_made")) == NULL ||
                           (S_created = PyUnicode_InternFromString("_created")) == NULL))
        return NULL;
    if ((kwnames != NULL && PyTuple_GET_SIZE(kwnames)) || nargs < 4)
        return py_method(t, 5, args, nargs, kwnames);
    PyObject *notif = nargs > 4 ? args[4] : EMPTY_BYTES;  /* (op, local_descs, remote_descs, remote_agent, notif, *rest) */
    PyObject *handle = inner_with_notif(t, S_createXferReq, args, nargs, 4, notif);
    if (handle == NULL)
        return NULL;
    PyObject *lc[3] = {NULL, NULL, NULL}, *rc_[3] = {NULL, NULL, NULL}, *made = NULL, *remote = NULL, *hex = NULL,
             *detail = NULL, *tot = NULL, *n = NULL, *descs = NULL, *msg = NULL;
    uint64_t lsum = 0, rsum = 0;
    Py_ssize_t nl = 0, nr = 0;
    int got = 0;
    PyObject *agent = args[3];
    if ((made = PyObject_GetAttr(t->pytap, S_made)) == NULL)
        goto fail;
    if (PyDict_Check(made) && (PyUnicode_CheckExact(agent) || PyBytes_CheckExact(agent))) {
        got = made_side(t, made, args[1], lc, &lsum, &nl);
        if (got > 0)
            got = made_side(t, made, args[2], rc_, &rsum, &nr);
        if (got < 0)
            goto fail;
    }
    if (got > 0) {
        int write = PyObject_RichCompareBool(args[0], t->write, Py_EQ);
        if (write < 0)
            goto fail;
        PyObject *op_ = CONST(t, write ? C_WRITE : C_READ);
        /* agent_tap._name: nixl hands the peer's name out as bytes */
        remote = PyBytes_CheckExact(agent)
                     ? PyUnicode_DecodeUTF8(PyBytes_AS_STRING(agent), PyBytes_GET_SIZE(agent), "replace")
                     : Py_NewRef(agent);
        if (remote == NULL || (hex = PyNumber_ToBase(handle, 16)) == NULL ||
            (detail = PyUnicode_FromFormat("{\"handle\": \"%U\", \"prepped\": false}", hex)) == NULL ||
            (tot = PyLong_FromUnsignedLongLong(lsum)) == NULL || (n = PyLong_FromSsize_t(write ? nl : nr)) == NULL)
            goto fail;
        /* _handle_descs: src/dst is the direction the bytes move, whoever initiated */
        if (write)
            descs = PyTuple_Pack(13, op_, t->text, remote, lc[0], rc_[0], lc[1], lc[2], rc_[2], Py_None, Py_None,
                                 Py_None, Py_None, n);
        else
            descs = PyTuple_Pack(13, op_, remote, t->text, rc_[0], lc[0], rc_[1], rc_[2], lc[2], Py_None, Py_None,
                                 Py_None, Py_None, n);
        if (descs == NULL || (msg = msg_bytes(notif)) == NULL)
            goto fail;
        if (keep_handle(t, handle, op_, remote, msg, descs, detail, tot) < 0)
            goto fail;
    } else {  /* lists of other kinds (tuples, tensors, prepared before tracing): in Python */
        PyObject *pa[] = {t->pytap, handle, args[0], args[1], args[2], agent, notif};
        PyObject *r = PyObject_VectorcallMethod(S_created, pa, 7 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (r == NULL)
            goto fail;
        Py_DECREF(r);
    }
    goto out;
fail:
    Py_CLEAR(handle);
out:
    for (int c = 0; c < 3; c++) {
        Py_XDECREF(lc[c]);
        Py_XDECREF(rc_[c]);
    }
    Py_XDECREF(made);
    Py_XDECREF(remote);
    Py_XDECREF(hex);
    Py_XDECREF(detail);
    Py_XDECREF(tot);
    Py_XDECREF(n);
    Py_XDECREF(descs);
    Py_XDECREF(msg);
    return handle;
}

static int tap_traverse(TapObject *t, visitproc visit, void *arg) {
    Py_VISIT(t->ap);
    Py_VISIT(t->pytap);
    Py_VISIT(t->inner);
    Py_VISIT(t->name);
    Py_VISIT(t->xfer_ids);
    Py_VISIT(t->handles);
    Py_VISIT(t->untraced);
    Py_VISIT(t->parse);
    Py_VISIT(t->in_prog);
    Py_VISIT(t->success);
    Py_VISIT(t->consts);
    Py_VISIT(t->fallbacks);
    Py_VISIT(t->dlists);
    Py_VISIT(t->text);
    Py_VISIT(t->write);
    Py_VISIT(t->empty);
    Py_VISIT(t->i64);
    Py_VISIT(t->u64);
    Py_VISIT(t->i32);
    return 0;
}

static int tap_clear(TapObject *t) {
    Py_CLEAR(t->ap);
    Py_CLEAR(t->pytap);
    Py_CLEAR(t->inner);
    Py_CLEAR(t->name);
    Py_CLEAR(t->xfer_ids);
    Py_CLEAR(t->handles);
    Py_CLEAR(t->untraced);
    Py_CLEAR(t->parse);
    Py_CLEAR(t->in_prog);
    Py_CLEAR(t->success);
    Py_CLEAR(t->consts);
    Py_CLEAR(t->fallbacks);
    Py_CLEAR(t->dlists);
    Py_CLEAR(t->text);
    Py_CLEAR(t->write);
    Py_CLEAR(t->empty);
    Py_CLEAR(t->i64);
    Py_CLEAR(t->u64);
    Py_CLEAR(t->i32);
    return 0;
}

static void tap_dealloc(TapObject *t) {
    PyObject_GC_UnTrack(t);
    tap_clear(t);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

static PyMethodDef tap_methods[] = {
    {"postXferReq", (PyCFunction)(void (*)(void))tap_post, METH_FASTCALL | METH_KEYWORDS, "BindingTap.postXferReq"},
    {"getXferStatus", (PyCFunction)(void (*)(void))tap_status, METH_FASTCALL | METH_KEYWORDS,
     "BindingTap.getXferStatus"},
    {"releaseXferReq", (PyCFunction)(void (*)(void))tap_release, METH_FASTCALL | METH_KEYWORDS,
     "BindingTap.releaseXferReq"},
    {"getNotifs", (PyCFunction)(void (*)(void))tap_notifs, METH_FASTCALL | METH_KEYWORDS, "BindingTap.getNotifs"},
    {"makeXferReq", (PyCFunction)(void (*)(void))tap_make, METH_FASTCALL | METH_KEYWORDS, "BindingTap.makeXferReq"},
    {"createXferReq", (PyCFunction)(void (*)(void))tap_create, METH_FASTCALL | METH_KEYWORDS,
     "BindingTap.createXferReq"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject TapType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kvtrace.tracer._rows.Tap",
    .tp_basicsize = sizeof(TapObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "the NIXL tap's per-posting calls in C (see tap())",
    .tp_traverse = (traverseproc)tap_traverse,
    .tp_clear = (inquiry)tap_clear,
    .tp_dealloc = (destructor)tap_dealloc,
    .tp_methods = tap_methods,
};

static PyObject *tap(PyObject *self, PyObject *args) {
    PyObject *pytap, *inner, *name, *ap, *xfer_ids, *handles, *untraced, *parse, *in_prog, *success, *consts,
        *fallbacks, *dlists, *text, *write, *empty, *i64, *u64, *i32;
    int telemetry, plain_hashes, plain_descs;
    if (!PyArg_ParseTuple(args, "OOOO!OO!O!OpOOO!O!pO!OOOOOOp", &pytap, &inner, &name, &AppenderType, &ap, &xfer_ids,
                          &PyDict_Type, &handles, &PyDict_Type, &untraced, &parse, &telemetry, &in_prog, &success,
                          &PyTuple_Type, &consts, &PyTuple_Type, &fallbacks, &plain_hashes, &PyDict_Type, &dlists,
                          &text, &write, &empty, &i64, &u64, &i32, &plain_descs))
        return NULL;
    if (PyTuple_GET_SIZE(consts) != N_CONSTS || PyTuple_GET_SIZE(fallbacks) != 6 ||
        (xfer_ids != Py_None && Py_TYPE(xfer_ids)->tp_iternext == NULL)) {
        PyErr_SetString(PyExc_TypeError, "tap: 9 constants, 6 fallbacks and an iterator (or None) expected");
        return NULL;
    }
    TapObject *t = PyObject_GC_New(TapObject, &TapType);
    if (t == NULL)
        return NULL;
    t->ap = (AppenderObject *)Py_NewRef(ap);
    t->pytap = Py_NewRef(pytap), t->inner = Py_NewRef(inner), t->name = Py_NewRef(name);
    t->xfer_ids = Py_NewRef(xfer_ids), t->handles = Py_NewRef(handles), t->untraced = Py_NewRef(untraced);
    t->parse = Py_NewRef(parse), t->in_prog = Py_NewRef(in_prog), t->success = Py_NewRef(success);
    t->consts = Py_NewRef(consts), t->fallbacks = Py_NewRef(fallbacks);
    t->dlists = Py_NewRef(dlists), t->text = Py_NewRef(text), t->write = Py_NewRef(write);
    t->empty = Py_NewRef(empty), t->i64 = Py_NewRef(i64), t->u64 = Py_NewRef(u64), t->i32 = Py_NewRef(i32);
    t->telemetry = telemetry, t->plain_hashes = plain_hashes, t->plain_descs = plain_descs;
    if ((t->tags = tag_mode(parse)) < 0) {
        t->tags = 0;
        Py_DECREF(t);
        return NULL;
    }
    PyObject_GC_Track(t);
    return (PyObject *)t;
}

static int tap_names(void) {
    static const char *const nm[14] = {"closed", "untraced", "new_xfer_id", "descs_posted", "hash_mark",
                                       "wait_hashes", "_terminal_detail", "postXferReq", "getXferStatus",
                                       "releaseXferReq", "getNotifs", "makeXferReq", "_prepped", "createXferReq"};
    PyObject *o[14];
    if (intern_all(o, nm, 14) < 0)
        return -1;
    S_makeXferReq = o[11], S_prepped = o[12], S_createXferReq = o[13];
    S_closed = o[0], S_untraced = o[1], S_new_xfer_id = o[2], S_descs_posted = o[3], S_hash_mark = o[4];
    S_wait_hashes = o[5], S_terminal_detail = o[6], S_postXferReq = o[7], S_getXferStatus = o[8];
    S_releaseXferReq = o[9], S_getNotifs = o[10];
    ZERO = PyLong_FromLong(0);
    EMPTY_BYTES = PyBytes_FromStringAndSize("", 0);
    NONE_PAIR = PyTuple_Pack(2, Py_None, Py_None);
    if (ZERO == NULL || EMPTY_BYTES == NULL || NONE_PAIR == NULL || PyType_Ready(&TapHandleType) < 0 ||
        PyType_Ready(&TapType) < 0 || PyType_Ready(&TakeType) < 0)
        return -1;
    return 0;
}

static PyMethodDef methods[] = {
    {"columns", columns, METH_VARARGS, "rows -> an Arrow C struct array (address, capsule), or None"},
    {"pick", pick, METH_VARARGS, "the ring bookkeeping's rows and columns"},
    {"book", book, METH_VARARGS, "the ring bookkeeping's loop over its rows"},
    {"json_text", json_text, METH_O, "plain detail values as the recorder's JSON text, or None"},
    {"appender", appender, METH_VARARGS, "the recorder's per-event methods in C, on its own buffers"},
    {"expand", expand, METH_O, "the buffered rows with each layers() entry made into its rows"},
    {"tap", tap, METH_VARARGS, "the NIXL tap's per-posting calls in C, on an appender"},
    {"take_into", take_into, METH_VARARGS, "gather a batch's Take columns into one output buffer"},
    {"tag_parse", tag_parse, METH_VARARGS, "the tag presets' parse in C (bits: 1 sglang, 2 vllm)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rows",
                                    "the recorder's event rows to Arrow in C", -1, methods};

PyMODINIT_FUNC PyInit__rows(void) {
    MINUS_ONE = PyLong_FromLong(-1);
    ONE = PyLong_FromLong(1);
    LAYERS_MARK = PyUnicode_FromString("kvtrace: a layers() call's rows");  /* compared by identity */
    if (MINUS_ONE == NULL || ONE == NULL || LAYERS_MARK == NULL || appender_names() < 0 || PyType_Ready(&AppenderType) < 0 ||
        tap_names() < 0)
        return NULL;
    PyObject *mod = PyModule_Create(&module);
    if (mod == NULL || PyModule_AddObjectRef(mod, "TapHandle", (PyObject *)&TapHandleType) < 0 ||
        PyModule_AddObjectRef(mod, "Appender", (PyObject *)&AppenderType) < 0 ||
        PyModule_AddObjectRef(mod, "Take", (PyObject *)&TakeType) < 0) {
        Py_XDECREF(mod);
        return NULL;
    }
    return mod;
}
