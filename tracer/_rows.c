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

static PyMethodDef methods[] = {
    {"columns", columns, METH_VARARGS, "rows -> an Arrow C struct array (address, capsule), or None"},
    {"pick", pick, METH_VARARGS, "the ring bookkeeping's rows and columns"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rows",
                                    "the recorder's event rows to Arrow in C", -1, methods};

PyMODINIT_FUNC PyInit__rows(void) { return PyModule_Create(&module); }
