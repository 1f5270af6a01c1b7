/*
 * _crecords.c -- the C twin of strom/records/record.py and varint.py: the per-record hot
 * loops of Kafka's v2 record batch (encoding records into a records section, decoding them
 * out of one, zigzag varints). The batch header, CRC-32C and compression stay in Python.
 *
 * Same functions, same checks in the same order and the same error messages as the
 * pure-Python reference; record.py's docstring has the record layout and the list of checks.
 *
 *   record := length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
 *             | keyLength varint | key | valueLength varint | value
 *             | headerCount varint | headerCount x (keyLength varint | utf-8 key
 *                                                 | valueLength varint | value)
 *
 * Memory safety: every read is bounds-checked against the end of the current record or of
 * the records section; the input is held through the buffer protocol for the whole call (so a
 * bytearray cannot be resized under us); every write is preceded by a capacity check.
 * Thread safety: the module globals are set once at import, under the GIL, and only read
 * afterwards. A RecordsWriter is not thread-safe (no more than its Python twin) but refuses
 * re-entrant use. Written against the CPython C API directly (3.11+).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#define HEADER_SIZE 61
#define MAX_BATCH_SIZE ((Py_ssize_t)1 << 30)
#define MAX_RECORDS_SIZE (MAX_BATCH_SIZE - HEADER_SIZE)
#define MIN_RECORD_BODY 6
#define MIN_RECORD_SIZE (MIN_RECORD_BODY + 1)
#define MAX_COUNT INT32_MAX

/* Set once by the module init (under the GIL), read-only afterwards. */
static PyTypeObject *record_type;
static PyObject *exc_truncated;  /* TruncatedBatchError */
static PyObject *exc_length;     /* InvalidBatchLengthError */
static PyObject *exc_count;      /* RecordCountMismatchError */
static PyObject *exc_overflow;   /* VarintOverflowError */
static PyObject *exc_layout;     /* InvalidRecordLayoutError */

/* ------------------------------------------------------------------ varints */

#define V_OK 0
#define V_TRUNCATED (-1)
#define V_OVERFLOW (-2)

static inline uint64_t
zigzag64(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t
unzigzag64(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static inline int
varint_size(uint64_t u)
{
    int n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *
put_varint(uint8_t *p, uint64_t u)
{
    while (u >= 0x80) {
        *p++ = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    *p++ = (uint8_t)u;
    return p;
}

/* Unsigned base-128 varint at *pp, not reading at or beyond end. A 32-bit varint is at most 5
 * bytes with a last byte <= 0x0f, a 64-bit one at most 10 with a last byte <= 0x01. Advances
 * *pp only on success. */
static inline int
get_varint(const uint8_t **pp, const uint8_t *end, int bits, uint64_t *out)
{
    const uint8_t *p = *pp;
    const int max_bytes = bits == 32 ? 5 : 10;
    const unsigned last_max = bits == 32 ? 0x0f : 0x01;
    uint64_t v = 0;
    for (int i = 0;; i++) {
        if (p >= end) {
            return V_TRUNCATED;
        }
        unsigned b = *p++;
        if (i == max_bytes - 1 && b > last_max) {
            return V_OVERFLOW;
        }
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (b < 0x80) {
            *out = v;
            *pp = p;
            return V_OK;
        }
    }
}

/* --------------------------------------------------------------- decoding */

typedef struct {
    const uint8_t *base;      /* start of the records section (positions are relative) */
    const uint8_t *p;         /* read position */
    const uint8_t *end;       /* end of the records section */
    const uint8_t *rec_start; /* current record's length varint */
    const uint8_t *rec_end;   /* end of the current record */
    Py_ssize_t index;         /* current record's index */
} Cursor;

/* Raise exc with "record <i> at byte <pos>: <formatted tail>"; returns -1. */
static int
fail(Cursor *c, PyObject *exc, const char *fmt, ...)
{
    va_list va;
    va_start(va, fmt);
    PyObject *tail = PyUnicode_FromFormatV(fmt, va);
    va_end(va);
    if (tail != NULL) {
        PyErr_Format(exc, "record %zd at byte %zd: %U", c->index,
                     (Py_ssize_t)(c->rec_start - c->base), tail);
        Py_DECREF(tail);
    }
    return -1;
}

/* One zigzag varint field of the current record. */
static inline int
field(Cursor *c, const char *name, int bits, int64_t *out)
{
    const uint8_t *p = c->p;
    if (p < c->rec_end && *p < 0x80) {
        int64_t b = *p;
        c->p = p + 1;
        *out = (b >> 1) ^ -(b & 1);
        return 0;
    }
    uint64_t u;
    int rc = get_varint(&c->p, c->rec_end, bits, &u);
    if (rc == V_TRUNCATED) {
        return fail(c, exc_layout, "%s runs past the end of the record", name);
    }
    if (rc == V_OVERFLOW) {
        return fail(c, exc_overflow, "%s overflows %d bits", name, bits);
    }
    *out = unzigzag64(u);
    return 0;
}

/* Position on record c->index: read and check its length. */
static int
begin(Cursor *c, Py_ssize_t count)
{
    const uint8_t *p = c->p;
    c->rec_start = p;
    if (p >= c->end) {
        PyErr_Format(exc_count, "batch says %zd records, its records section ends after %zd",
                     count, c->index);
        return -1;
    }
    uint64_t u;
    int rc = get_varint(&p, c->end, 32, &u);
    if (rc == V_TRUNCATED) {
        return fail(c, exc_truncated, "length varint is truncated");
    }
    if (rc == V_OVERFLOW) {
        return fail(c, exc_overflow, "length overflows 32 bits");
    }
    int64_t length = unzigzag64(u);
    if (length < MIN_RECORD_BODY) {
        return fail(c, exc_length, "length %lld is below the minimum of %d", (long long)length,
                    MIN_RECORD_BODY);
    }
    if (length > c->end - p) {
        return fail(c, exc_truncated,
                    "length %lld runs past the end of the records section (%zd bytes left)",
                    (long long)length, (Py_ssize_t)(c->end - p));
    }
    c->rec_end = p + length;
    c->p = p + 1; /* attributes: unused */
    return 0;
}

/* A length-prefixed byte field; *ptr = NULL for a null (-1) one. */
static inline int
nullable(Cursor *c, const char *name, const char *length_name, const uint8_t **ptr,
         Py_ssize_t *len)
{
    int64_t n;
    if (field(c, length_name, 32, &n) < 0) {
        return -1;
    }
    if (n < 0) {
        if (n == -1) {
            *ptr = NULL;
            *len = 0;
            return 0;
        }
        return fail(c, exc_layout, "%s length %lld is negative", name, (long long)n);
    }
    if (n > c->rec_end - c->p) {
        return fail(c, exc_layout, "%s runs past the end of the record", name);
    }
    *ptr = c->p;
    *len = (Py_ssize_t)n;
    c->p += n;
    return 0;
}

static inline PyObject *
bytes_or_none(const uint8_t *ptr, Py_ssize_t len)
{
    if (ptr == NULL) {
        Py_RETURN_NONE;
    }
    return PyBytes_FromStringAndSize((const char *)ptr, len);
}

/* The headers of the current record as a tuple of (str, bytes | None) pairs. */
static PyObject *
read_headers(Cursor *c)
{
    int64_t n;
    if (field(c, "header count", 32, &n) < 0) {
        return NULL;
    }
    if (n < 0) {
        fail(c, exc_layout, "header count %lld is negative", (long long)n);
        return NULL;
    }
    if (n == 0) {
        return PyTuple_New(0);
    }
    if (n > (c->rec_end - c->p) / 2) {
        fail(c, exc_layout, "header count %lld runs past the end of the record", (long long)n);
        return NULL;
    }
    PyObject *headers = PyTuple_New((Py_ssize_t)n);
    if (headers == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < (Py_ssize_t)n; i++) {
        int64_t klen;
        if (field(c, "header key length", 32, &klen) < 0) {
            goto error;
        }
        if (klen < 0) {
            fail(c, exc_layout, "header key length %lld is negative", (long long)klen);
            goto error;
        }
        if (klen > c->rec_end - c->p) {
            fail(c, exc_layout, "header key runs past the end of the record");
            goto error;
        }
        PyObject *key = PyUnicode_DecodeUTF8((const char *)c->p, (Py_ssize_t)klen, "strict");
        if (key == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                fail(c, exc_layout, "header key is not valid UTF-8");
            }
            goto error;
        }
        c->p += klen;
        const uint8_t *vptr;
        Py_ssize_t vlen;
        if (nullable(c, "header value", "header value length", &vptr, &vlen) < 0) {
            Py_DECREF(key);
            goto error;
        }
        PyObject *value = bytes_or_none(vptr, vlen);
        if (value == NULL) {
            Py_DECREF(key);
            goto error;
        }
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            goto error;
        }
        PyTuple_SET_ITEM(pair, 0, key);
        PyTuple_SET_ITEM(pair, 1, value);
        PyObject_GC_UnTrack(pair); /* holds only atoms: can never be part of a cycle */
        PyTuple_SET_ITEM(headers, i, pair);
    }
    PyObject_GC_UnTrack(headers);
    return headers;
error:
    Py_DECREF(headers);
    return NULL;
}

typedef struct {
    int64_t offset_delta;
    int64_t timestamp;
    const uint8_t *key;
    Py_ssize_t key_len;
    const uint8_t *value;
    Py_ssize_t value_len;
    PyObject *headers; /* new reference on success */
} RawRecord;

static int
read_record(Cursor *c, int64_t first_ts, int has_override, int64_t override, int64_t last_od,
            int64_t prev, RawRecord *r)
{
    int64_t ts_delta, od;
    if (field(c, "timestamp delta", 64, &ts_delta) < 0) {
        return -1;
    }
    if (field(c, "offset delta", 32, &od) < 0) {
        return -1;
    }
    if (od <= prev || od > last_od) {
        return fail(c, exc_layout,
                    "offset delta %lld is out of order or beyond the last offset delta %lld",
                    (long long)od, (long long)last_od);
    }
    r->offset_delta = od;
    /* Java long arithmetic: wraps around. */
    r->timestamp = has_override ? override : (int64_t)((uint64_t)first_ts + (uint64_t)ts_delta);
    if (nullable(c, "key", "key length", &r->key, &r->key_len) < 0) {
        return -1;
    }
    if (nullable(c, "value", "value length", &r->value, &r->value_len) < 0) {
        return -1;
    }
    r->headers = read_headers(c);
    if (r->headers == NULL) {
        return -1;
    }
    if (c->p != c->rec_end) {
        Py_CLEAR(r->headers);
        return fail(c, exc_layout, "%zd bytes left over inside the record",
                    (Py_ssize_t)(c->rec_end - c->p));
    }
    return 0;
}

typedef struct {
    Py_buffer view;
    Cursor cursor;
    Py_ssize_t count;
    long long base_offset, first_ts, last_od, override;
    int has_override;
} DecodeArgs;

/* Parse (buf, start, end, count, base_offset, first_timestamp, last_offset_delta,
 * timestamp_override) and acquire the buffer; on success the caller releases args->view. */
static int
decode_args(PyObject *args, DecodeArgs *a)
{
    PyObject *buf, *override;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "OnnnLLLO", &buf, &start, &end, &a->count, &a->base_offset,
                          &a->first_ts, &a->last_od, &override)) {
        return -1;
    }
    a->has_override = override != Py_None;
    a->override = 0;
    if (a->has_override) {
        a->override = PyLong_AsLongLong(override);
        if (a->override == -1 && PyErr_Occurred()) {
            return -1;
        }
    }
    if (PyObject_GetBuffer(buf, &a->view, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    if (!(0 <= start && start <= end && end <= a->view.len)) {
        PyErr_Format(PyExc_ValueError, "records section [%zd, %zd) is outside the buffer", start,
                     end);
        goto error;
    }
    if (a->count < 0 || a->count > MAX_COUNT) {
        PyErr_Format(PyExc_ValueError, "record count %zd is out of range", a->count);
        goto error;
    }
    if (a->last_od < 0 || a->last_od > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "last offset delta %lld is out of range", a->last_od);
        goto error;
    }
    if (a->base_offset > INT64_MAX - a->last_od) {
        PyErr_Format(exc_layout, "base offset %lld plus last offset delta %lld overflows int64",
                     a->base_offset, a->last_od);
        goto error;
    }
    const uint8_t *data = (const uint8_t *)a->view.buf;
    a->cursor.base = data + start;
    a->cursor.p = data + start;
    a->cursor.end = data + end;
    a->cursor.rec_start = data + start;
    a->cursor.rec_end = data + start;
    a->cursor.index = 0;
    return 0;
error:
    PyBuffer_Release(&a->view);
    return -1;
}

/* Records the section can hold at most: bounds every allocation by the input's size. */
static inline Py_ssize_t
capacity(DecodeArgs *a)
{
    Py_ssize_t fit = (Py_ssize_t)(a->cursor.end - a->cursor.base) / MIN_RECORD_SIZE;
    return a->count < fit ? a->count : fit;
}

static int
check_end(DecodeArgs *a)
{
    if (a->cursor.p != a->cursor.end) {
        PyErr_Format(exc_count, "batch says %zd records, but %zd bytes follow the last one",
                     a->count, (Py_ssize_t)(a->cursor.end - a->cursor.p));
        return -1;
    }
    return 0;
}

static PyObject *
decode_records(PyObject *module, PyObject *args)
{
    DecodeArgs a;
    if (decode_args(args, &a) < 0) {
        return NULL;
    }
    Cursor *c = &a.cursor;
    Py_ssize_t cap = capacity(&a);
    PyObject *list = PyList_New(cap);
    if (list == NULL) {
        goto error;
    }
    int64_t prev = -1;
    for (Py_ssize_t i = 0; i < a.count; i++) {
        RawRecord r;
        c->index = i;
        if (begin(c, a.count) < 0) {
            goto error;
        }
        if (read_record(c, a.first_ts, a.has_override, a.override, a.last_od, prev, &r) < 0) {
            goto error;
        }
        prev = r.offset_delta;
        if (i >= cap) { /* unreachable: each record takes >= MIN_RECORD_SIZE bytes */
            Py_DECREF(r.headers);
            PyErr_SetString(PyExc_SystemError, "record capacity exceeded");
            goto error;
        }
        PyObject *rec = record_type->tp_alloc(record_type, 5);
        PyObject *offset = PyLong_FromLongLong(a.base_offset + r.offset_delta);
        PyObject *timestamp = PyLong_FromLongLong(r.timestamp);
        PyObject *key = bytes_or_none(r.key, r.key_len);
        PyObject *value = bytes_or_none(r.value, r.value_len);
        if (rec == NULL || offset == NULL || timestamp == NULL || key == NULL || value == NULL) {
            Py_XDECREF(rec);
            Py_XDECREF(offset);
            Py_XDECREF(timestamp);
            Py_XDECREF(key);
            Py_XDECREF(value);
            Py_DECREF(r.headers);
            goto error;
        }
        PyTuple_SET_ITEM(rec, 0, offset);
        PyTuple_SET_ITEM(rec, 1, timestamp);
        PyTuple_SET_ITEM(rec, 2, key);
        PyTuple_SET_ITEM(rec, 3, value);
        PyTuple_SET_ITEM(rec, 4, r.headers);
        /* A Record holds only ints, bytes, None and untracked tuples: it can never be part of
         * a reference cycle, so the cyclic GC need not scan the (many) records. */
        PyObject_GC_UnTrack(rec);
        PyList_SET_ITEM(list, i, rec);
    }
    if (check_end(&a) < 0) {
        goto error;
    }
    PyBuffer_Release(&a.view);
    return list;
error:
    Py_XDECREF(list);
    PyBuffer_Release(&a.view);
    return NULL;
}

static PyObject *
decode_columns(PyObject *module, PyObject *args)
{
    DecodeArgs a;
    if (decode_args(args, &a) < 0) {
        return NULL;
    }
    Cursor *c = &a.cursor;
    Py_ssize_t cap = capacity(&a);
    PyObject *cols[5] = {NULL, NULL, NULL, NULL, NULL};
    for (int k = 0; k < 5; k++) {
        cols[k] = PyList_New(cap);
        if (cols[k] == NULL) {
            goto error;
        }
    }
    int64_t prev = -1;
    for (Py_ssize_t i = 0; i < a.count; i++) {
        RawRecord r;
        c->index = i;
        if (begin(c, a.count) < 0) {
            goto error;
        }
        if (read_record(c, a.first_ts, a.has_override, a.override, a.last_od, prev, &r) < 0) {
            goto error;
        }
        prev = r.offset_delta;
        if (i >= cap) { /* unreachable: each record takes >= MIN_RECORD_SIZE bytes */
            Py_DECREF(r.headers);
            PyErr_SetString(PyExc_SystemError, "record capacity exceeded");
            goto error;
        }
        PyObject *items[5] = {
            PyLong_FromLongLong(a.base_offset + r.offset_delta),
            PyLong_FromLongLong(r.timestamp),
            bytes_or_none(r.key, r.key_len),
            bytes_or_none(r.value, r.value_len),
            r.headers,
        };
        int failed = 0;
        for (int k = 0; k < 5; k++) {
            if (items[k] == NULL) {
                failed = 1;
            }
        }
        if (failed) {
            for (int k = 0; k < 5; k++) {
                Py_XDECREF(items[k]);
            }
            goto error;
        }
        for (int k = 0; k < 5; k++) {
            PyList_SET_ITEM(cols[k], i, items[k]);
        }
    }
    if (check_end(&a) < 0) {
        goto error;
    }
    PyBuffer_Release(&a.view);
    return Py_BuildValue("(NNNNN)", cols[0], cols[1], cols[2], cols[3], cols[4]);
error:
    for (int k = 0; k < 5; k++) {
        Py_XDECREF(cols[k]);
    }
    PyBuffer_Release(&a.view);
    return NULL;
}

/* --------------------------------------------------------------- encoding */

typedef struct {
    PyObject_HEAD
    uint8_t *buf;
    Py_ssize_t len;
    Py_ssize_t cap;
    Py_ssize_t count;
    int64_t first_ts;
    int64_t max_ts;
    int closed;
    int busy;
} Writer;

typedef struct {
    const uint8_t *ptr; /* NULL: null */
    Py_ssize_t len;     /* -1 for null */
    Py_buffer view;
    int has_view;
} Bytes;

static int
type_error(const char *prefix, PyObject *obj, const char *suffix)
{
    PyObject *name = PyType_GetName(Py_TYPE(obj));
    if (name != NULL) {
        PyErr_Format(PyExc_TypeError, "%s%U%s", prefix, name, suffix);
        Py_DECREF(name);
    }
    return -1;
}

static int
get_bytes(PyObject *obj, Bytes *b, const char *what)
{
    b->has_view = 0;
    if (obj == Py_None) {
        b->ptr = NULL;
        b->len = -1;
        return 0;
    }
    if (PyBytes_CheckExact(obj)) {
        b->ptr = (const uint8_t *)PyBytes_AS_STRING(obj);
        b->len = PyBytes_GET_SIZE(obj);
        return 0;
    }
    if (!PyObject_CheckBuffer(obj)) {
        char prefix[64];
        PyOS_snprintf(prefix, sizeof(prefix), "%s must be bytes-like or None, not ", what);
        return type_error(prefix, obj, "");
    }
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_SIMPLE) < 0) {
        if (PyErr_ExceptionMatches(PyExc_BufferError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_BufferError, "%s must be a C-contiguous buffer", what);
        }
        return -1;
    }
    b->has_view = 1;
    b->ptr = (const uint8_t *)b->view.buf;
    b->len = b->view.len;
    return 0;
}

static inline void
release_bytes(Bytes *b)
{
    if (b->has_view) {
        PyBuffer_Release(&b->view);
        b->has_view = 0;
    }
}

static int
too_large(void)
{
    PyErr_Format(PyExc_ValueError,
                 "record would make the records section larger than %zd bytes",
                 (Py_ssize_t)MAX_RECORDS_SIZE);
    return -1;
}

static int
reserve(Writer *w, Py_ssize_t extra)
{
    Py_ssize_t need = w->len + extra;
    if (need <= w->cap) {
        return 0;
    }
    Py_ssize_t cap = w->cap < 256 ? 256 : w->cap;
    while (cap < need) {
        cap *= 2;
    }
    uint8_t *buf = PyMem_Realloc(w->buf, (size_t)cap);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->buf = buf;
    w->cap = cap;
    return 0;
}

static inline uint8_t *
put_bytes(uint8_t *p, const Bytes *b)
{
    p = put_varint(p, zigzag64(b->len));
    if (b->len > 0) {
        memcpy(p, b->ptr, (size_t)b->len);
        p += b->len;
    }
    return p;
}

static int
write_headers(Writer *w, PyObject *seq, Py_ssize_t start)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    Py_ssize_t headers_start = w->len;
    if (reserve(w, 5) < 0) {
        return -1;
    }
    w->len = put_varint(w->buf + w->len, zigzag64(n)) - w->buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        if (!(PyTuple_Check(pair) || PyList_Check(pair)) || Py_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "each header must be a (str, bytes | None) pair");
            return -1;
        }
        PyObject *hkey = PySequence_Fast_GET_ITEM(pair, 0);
        PyObject *hvalue = PySequence_Fast_GET_ITEM(pair, 1);
        if (!PyUnicode_Check(hkey)) {
            return type_error("header key must be a str, not ", hkey, "");
        }
        Py_ssize_t klen;
        const char *kptr = PyUnicode_AsUTF8AndSize(hkey, &klen);
        if (kptr == NULL) {
            return -1;
        }
        Bytes value;
        if (get_bytes(hvalue, &value, "header value") < 0) {
            return -1;
        }
        /* Same bound as the Python twin: encoded headers so far (after the count varint). */
        Py_ssize_t written = w->len - headers_start - varint_size(zigzag64(n));
        if (klen + value.len > MAX_RECORDS_SIZE - start - written) {
            release_bytes(&value);
            return too_large();
        }
        if (reserve(w, 10 + klen + (value.len > 0 ? value.len : 0)) < 0) {
            release_bytes(&value);
            return -1;
        }
        uint8_t *p = put_varint(w->buf + w->len, zigzag64(klen));
        memcpy(p, kptr, (size_t)klen);
        p += klen;
        p = put_bytes(p, &value);
        w->len = p - w->buf;
        release_bytes(&value);
    }
    return 0;
}

/* Append one record; on failure the writer is left as it was. Mirrors RecordsWriter._append. */
static int
append_one(Writer *w, PyObject *ts_obj, PyObject *key_obj, PyObject *value_obj,
           PyObject *headers_obj, Py_ssize_t *offset_delta)
{
    if (!PyLong_Check(ts_obj)) {
        return type_error("timestamp_ms must be an int, not ", ts_obj, "");
    }
    int overflow;
    long long ts = PyLong_AsLongLongAndOverflow(ts_obj, &overflow);
    if (overflow) {
        PyErr_Format(PyExc_ValueError, "timestamp_ms %R is outside the int64 range", ts_obj);
        return -1;
    }
    if (ts == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (w->count >= MAX_COUNT) {
        PyErr_Format(PyExc_ValueError, "a batch holds at most %d records", MAX_COUNT);
        return -1;
    }
    Bytes key, value;
    if (get_bytes(key_obj, &key, "key") < 0) {
        return -1;
    }
    if (get_bytes(value_obj, &value, "value") < 0) {
        release_bytes(&key);
        return -1;
    }
    PyObject *headers = NULL;
    Py_ssize_t start = w->len;
    if (key.len + value.len > MAX_RECORDS_SIZE - start) {
        too_large();
        goto error;
    }
    if (headers_obj != Py_None) {
        headers = PySequence_Fast(headers_obj,
                                  "headers must be a sequence of (str, bytes | None) pairs");
        if (headers == NULL) {
            goto error;
        }
        if (PySequence_Fast_GET_SIZE(headers) == 0) {
            Py_CLEAR(headers);
        }
    }
    Py_ssize_t od = w->count;
    int64_t first_ts = od == 0 ? (int64_t)ts : w->first_ts;
    uint64_t ts_delta = zigzag64((int64_t)((uint64_t)ts - (uint64_t)first_ts));
    uint64_t zod = zigzag64(od);
    Py_ssize_t key_part = varint_size(zigzag64(key.len)) + (key.len > 0 ? key.len : 0);
    Py_ssize_t value_part = varint_size(zigzag64(value.len)) + (value.len > 0 ? value.len : 0);
    if (headers == NULL) {
        /* Fast path: the body length is known up front. */
        Py_ssize_t body = 1 + varint_size(ts_delta) + varint_size(zod) + key_part + value_part + 1;
        Py_ssize_t total = varint_size(zigzag64(body)) + body;
        if (start + total > MAX_RECORDS_SIZE) {
            too_large();
            goto error;
        }
        if (reserve(w, total) < 0) {
            goto error;
        }
        uint8_t *p = put_varint(w->buf + start, zigzag64(body));
        *p++ = 0; /* attributes */
        p = put_varint(p, ts_delta);
        p = put_varint(p, zod);
        p = put_bytes(p, &key);
        p = put_bytes(p, &value);
        *p++ = 0; /* header count */
        w->len = p - w->buf;
    }
    else {
        /* Write the body after 5 bytes kept for the length, then slide it into place. */
        if (reserve(w, 5 + 1 + 10 + 5 + key_part + value_part) < 0) {
            goto error;
        }
        Py_ssize_t body_start = start + 5;
        uint8_t *p = w->buf + body_start;
        *p++ = 0;
        p = put_varint(p, ts_delta);
        p = put_varint(p, zod);
        p = put_bytes(p, &key);
        p = put_bytes(p, &value);
        w->len = p - w->buf;
        if (write_headers(w, headers, start) < 0) {
            goto error;
        }
        Py_ssize_t body = w->len - body_start;
        int lsize = varint_size(zigzag64(body));
        if (start + lsize + body > MAX_RECORDS_SIZE) {
            too_large();
            goto error;
        }
        memmove(w->buf + start + lsize, w->buf + body_start, (size_t)body);
        put_varint(w->buf + start, zigzag64(body));
        w->len = start + lsize + body;
        Py_DECREF(headers);
        headers = NULL;
    }
    release_bytes(&key);
    release_bytes(&value);
    w->count = od + 1;
    w->first_ts = first_ts;
    if (od == 0 || ts > w->max_ts) {
        w->max_ts = ts;
    }
    *offset_delta = od;
    return 0;
error:
    w->len = start;
    Py_XDECREF(headers);
    release_bytes(&key);
    release_bytes(&value);
    return -1;
}

static int
writer_enter(Writer *w)
{
    if (w->busy) {
        PyErr_SetString(PyExc_RuntimeError, "RecordsWriter is already in use");
        return -1;
    }
    if (w->closed) {
        PyErr_SetString(PyExc_RuntimeError,
                        "the batch was built; no more records can be appended");
        return -1;
    }
    w->busy = 1;
    return 0;
}

static PyObject *
writer_append(Writer *w, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 3 || nargs > 4) {
        PyErr_Format(PyExc_TypeError,
                     "append() takes 3 or 4 positional arguments (%zd given)", nargs);
        return NULL;
    }
    if (writer_enter(w) < 0) {
        return NULL;
    }
    Py_ssize_t od;
    int rc = append_one(w, args[0], args[1], args[2], nargs == 4 ? args[3] : Py_None, &od);
    w->busy = 0;
    if (rc < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(od);
}

static PyTypeObject WriterType;

/* RecordsWriter.append for other C code (the producer's fast path, strom.producer._native),
 * exported as the capsule ``_crecords._append_api``: the same checks and errors, the offset
 * delta in ``*od``, no method call and no int object for the result. */
static int
capi_writer_append(PyObject *writer, PyObject *ts_obj, PyObject *key_obj, PyObject *value_obj,
                   PyObject *headers_obj, Py_ssize_t *od)
{
    if (Py_TYPE(writer) != &WriterType) {
        PyErr_SetString(PyExc_TypeError, "not a RecordsWriter");
        return -1;
    }
    Writer *w = (Writer *)writer;
    if (writer_enter(w) < 0) {
        return -1;
    }
    int rc = append_one(w, ts_obj, key_obj, value_obj, headers_obj, od);
    w->busy = 0;
    return rc;
}

static PyObject *
writer_append_many(Writer *w, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 3 || nargs > 4) {
        PyErr_Format(PyExc_TypeError,
                     "append_many() takes 3 or 4 positional arguments (%zd given)", nargs);
        return NULL;
    }
    if (writer_enter(w) < 0) {
        return NULL;
    }
    PyObject *lists[4] = {NULL, NULL, NULL, NULL};
    PyObject *result = NULL;
    Py_ssize_t saved_len = w->len, saved_count = w->count;
    int64_t saved_first = w->first_ts, saved_max = w->max_ts;
    int has_headers = nargs == 4 && args[3] != Py_None;
    /* Private copies: nothing else can resize them while we walk them. */
    for (int k = 0; k < 3 + has_headers; k++) {
        lists[k] = PySequence_List(args[k]);
        if (lists[k] == NULL) {
            goto done;
        }
    }
    Py_ssize_t n = PyList_GET_SIZE(lists[0]);
    if (PyList_GET_SIZE(lists[1]) != n || PyList_GET_SIZE(lists[2]) != n ||
        (has_headers && PyList_GET_SIZE(lists[3]) != n)) {
        PyErr_SetString(PyExc_ValueError,
                        "timestamps, keys, values and headers must have the same length");
        goto done;
    }
    Py_ssize_t first = w->count;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t od;
        PyObject *headers = has_headers ? PyList_GET_ITEM(lists[3], i) : Py_None;
        if (append_one(w, PyList_GET_ITEM(lists[0], i), PyList_GET_ITEM(lists[1], i),
                       PyList_GET_ITEM(lists[2], i), headers, &od) < 0) {
            w->len = saved_len;
            w->count = saved_count;
            w->first_ts = saved_first;
            w->max_ts = saved_max;
            goto done;
        }
    }
    result = PyLong_FromSsize_t(first);
done:
    for (int k = 0; k < 4; k++) {
        Py_XDECREF(lists[k]);
    }
    w->busy = 0;
    return result;
}

static PyObject *
writer_getvalue(Writer *w, PyObject *Py_UNUSED(ignored))
{
    return PyBytes_FromStringAndSize((const char *)w->buf, w->len);
}

static PyObject *
writer_close(Writer *w, PyObject *Py_UNUSED(ignored))
{
    if (w->busy) {
        PyErr_SetString(PyExc_RuntimeError, "RecordsWriter is already in use");
        return NULL;
    }
    w->closed = 1;
    Py_RETURN_NONE;
}

static PyObject *
writer_get_record_count(Writer *w, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(w->count);
}

static PyObject *
writer_get_size(Writer *w, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(w->len);
}

static PyObject *
writer_get_first_timestamp(Writer *w, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(w->count ? w->first_ts : -1);
}

static PyObject *
writer_get_max_timestamp(Writer *w, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(w->count ? w->max_ts : -1);
}

static PyObject *
writer_get_closed(Writer *w, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(w->closed);
}

static PyObject *
writer_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, ":RecordsWriter", kwlist)) {
        return NULL;
    }
    Writer *w = (Writer *)type->tp_alloc(type, 0);
    if (w == NULL) {
        return NULL;
    }
    w->buf = NULL;
    w->len = w->cap = w->count = 0;
    w->first_ts = w->max_ts = -1;
    w->closed = w->busy = 0;
    return (PyObject *)w;
}

static void
writer_dealloc(Writer *w)
{
    PyMem_Free(w->buf);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

static PyMethodDef writer_methods[] = {
    {"append", (PyCFunction)(void (*)(void))writer_append, METH_FASTCALL,
     "append(timestamp_ms, key, value, headers=None, /) -> offset delta of the record"},
    {"append_many", (PyCFunction)(void (*)(void))writer_append_many, METH_FASTCALL,
     "append_many(timestamps, keys, values, headers=None, /) -> first offset delta; "
     "all or none"},
    {"getvalue", (PyCFunction)writer_getvalue, METH_NOARGS,
     "The records section written so far."},
    {"close", (PyCFunction)writer_close, METH_NOARGS, "Refuse further appends."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef writer_getset[] = {
    {"record_count", (getter)writer_get_record_count, NULL, "Records appended.", NULL},
    {"size", (getter)writer_get_size, NULL, "Bytes of the records section so far.", NULL},
    {"first_timestamp", (getter)writer_get_first_timestamp, NULL,
     "The first record's timestamp; -1 before any record.", NULL},
    {"max_timestamp", (getter)writer_get_max_timestamp, NULL,
     "The largest record timestamp; -1 before any record.", NULL},
    {"closed", (getter)writer_get_closed, NULL, "Whether appends are refused.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject WriterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "strom.records._native._crecords.RecordsWriter",
    .tp_basicsize = sizeof(Writer),
    .tp_dealloc = (destructor)writer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Appends records to an uncompressed records section (C twin of "
              "strom.records.record.RecordsWriter). Not thread-safe.",
    .tp_methods = writer_methods,
    .tp_getset = writer_getset,
    .tp_new = writer_new,
};

/* ------------------------------------------------------- varint functions */

static PyObject *
encode_varint_impl(PyObject *value, int bits)
{
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (v == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (overflow || (bits == 32 && (v < INT32_MIN || v > INT32_MAX))) {
        PyErr_Format(PyExc_ValueError, "%s value %R is outside the int%d range",
                     bits == 32 ? "varint" : "varlong", value, bits);
        return NULL;
    }
    uint8_t out[10];
    uint8_t *end = put_varint(out, zigzag64(v));
    return PyBytes_FromStringAndSize((const char *)out, end - out);
}

static PyObject *
encode_varint(PyObject *module, PyObject *value)
{
    return encode_varint_impl(value, 32);
}

static PyObject *
encode_varlong(PyObject *module, PyObject *value)
{
    return encode_varint_impl(value, 64);
}

static PyObject *
decode_varint_impl(PyObject *args, int bits)
{
    PyObject *buf;
    Py_ssize_t pos = 0;
    if (!PyArg_ParseTuple(args, bits == 32 ? "O|n:decode_varint" : "O|n:decode_varlong", &buf,
                          &pos)) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    if (pos < 0 || pos > view.len) {
        PyErr_Format(PyExc_ValueError, "position %zd is outside the buffer of %zd bytes", pos,
                     view.len);
        goto done;
    }
    const uint8_t *start = (const uint8_t *)view.buf + pos;
    const uint8_t *p = start;
    uint64_t u;
    int rc = get_varint(&p, (const uint8_t *)view.buf + view.len, bits, &u);
    if (rc == V_TRUNCATED) {
        PyErr_Format(exc_truncated, "varint at byte %zd is truncated", pos);
        goto done;
    }
    if (rc == V_OVERFLOW) {
        PyErr_Format(exc_overflow, "varint at byte %zd overflows %d bits", pos, bits);
        goto done;
    }
    result = Py_BuildValue("(Ln)", (long long)unzigzag64(u), pos + (Py_ssize_t)(p - start));
done:
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
decode_varint(PyObject *module, PyObject *args)
{
    return decode_varint_impl(args, 32);
}

static PyObject *
decode_varlong(PyObject *module, PyObject *args)
{
    return decode_varint_impl(args, 64);
}

/* ----------------------------------------------------------------- module */

static PyMethodDef module_methods[] = {
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(buf, start, end, count, base_offset, first_timestamp, "
     "last_offset_delta, timestamp_override) -> list[Record]"},
    {"decode_columns", decode_columns, METH_VARARGS,
     "decode_columns(...same as decode_records...) -> (offsets, timestamps, keys, values, "
     "headers)"},
    {"encode_varint", encode_varint, METH_O, "Zigzag varint of an int32."},
    {"encode_varlong", encode_varlong, METH_O, "Zigzag varint of an int64."},
    {"decode_varint", decode_varint, METH_VARARGS,
     "decode_varint(buf, pos=0) -> (value, next_pos)"},
    {"decode_varlong", decode_varlong, METH_VARARGS,
     "decode_varlong(buf, pos=0) -> (value, next_pos)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "strom.records._native._crecords",
    .m_doc = "C twin of strom.records.record: per-record encode/decode loops of Kafka's v2 "
             "record batch.",
    .m_size = -1,
    .m_methods = module_methods,
};

static int
load_globals(void)
{
    static const char *names[] = {"TruncatedBatchError", "InvalidBatchLengthError",
                                  "RecordCountMismatchError", "VarintOverflowError",
                                  "InvalidRecordLayoutError"};
    PyObject **slots[] = {&exc_truncated, &exc_length, &exc_count, &exc_overflow, &exc_layout};
    PyObject *errors = PyImport_ImportModule("strom.errors");
    if (errors == NULL) {
        return -1;
    }
    for (int i = 0; i < 5; i++) {
        *slots[i] = PyObject_GetAttrString(errors, names[i]);
        if (*slots[i] == NULL) {
            Py_DECREF(errors);
            return -1;
        }
    }
    Py_DECREF(errors);
    PyObject *record = PyImport_ImportModule("strom.records.record");
    if (record == NULL) {
        return -1;
    }
    PyObject *type = PyObject_GetAttrString(record, "Record");
    Py_DECREF(record);
    if (type == NULL) {
        return -1;
    }
    PyTypeObject *t = (PyTypeObject *)type;
    /* Records are built the way tuple.__new__ builds a tuple subclass: the type must add no
     * storage (no __dict__, no slots) to tuple's layout. */
    if (!PyType_Check(type) || !PyType_IsSubtype(t, &PyTuple_Type) ||
        t->tp_basicsize != PyTuple_Type.tp_basicsize ||
        t->tp_itemsize != PyTuple_Type.tp_itemsize || t->tp_dictoffset != 0) {
        Py_DECREF(type);
        PyErr_SetString(PyExc_ImportError,
                        "strom.records.record.Record must be a plain tuple subclass");
        return -1;
    }
    record_type = t;
    return 0;
}

PyMODINIT_FUNC
PyInit__crecords(void)
{
    if (record_type == NULL && load_globals() < 0) {
        return NULL;
    }
    if (PyType_Ready(&WriterType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    Py_INCREF(&WriterType);
    if (PyModule_AddObject(module, "RecordsWriter", (PyObject *)&WriterType) < 0) {
        Py_DECREF(&WriterType);
        Py_DECREF(module);
        return NULL;
    }
    PyObject *api = PyCapsule_New((void *)capi_writer_append,
                                  "strom.records._native._crecords._append_api", NULL);
    if (api == NULL || PyModule_AddObject(module, "_append_api", api) < 0) {
        Py_XDECREF(api);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
