/*
 * _cproducer.c -- the C twin of the producer's per-record path (strom/producer/aio.py
 * ``Producer._try_send`` with ``Accumulator.append``), plus Kafka's murmur2.
 *
 * ``FastSend`` is the ``send`` of one producer: it checks the record, picks the partition
 * (given, murmur2 of the key, or the sticky partition), takes the wall clock, appends the
 * record to the open batch of its partition under the accumulator's lock and returns the
 * record's future -- without a Python frame. Anything out of the ordinary (a fatal producer,
 * a blocked transaction, serializers, a value that is not bytes, unknown metadata, a full
 * buffer_memory, an oversized record, a bad header, an append that fails) is handed, with
 * the very arguments it got, to the pure-Python ``send`` it was given as ``fallback``. The
 * fast path changes nothing before it decides to take a record, so the fallback starts from
 * the same state and raises the same errors.
 *
 * The hot fields live in C base classes the Python classes extend:
 *   BatchBase      size, count, closed, append (the record writer's append), deliveries
 *   AccumulatorBase used, buffer_memory, batch_size
 *   FutureBase     the record future's batch, index, timestamp, key and value sizes
 * so Python code reads and writes them as attributes and C reads them as struct fields.
 *
 * Thread safety: every call holds the GIL; the accumulator's state is changed only while the
 * accumulator's lock (a threading.Lock) is held, as the Python path does.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stdint.h>
#include <time.h>

#define RECORD_OVERHEAD 12

/* ------------------------------------------------------------------ murmur2 */

static int32_t
murmur2_raw(const uint8_t *data, Py_ssize_t length)
{
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    Py_ssize_t end = length & ~(Py_ssize_t)3;
    for (Py_ssize_t i = 0; i < end; i += 4) {
        uint32_t k = (uint32_t)data[i] | ((uint32_t)data[i + 1] << 8) |
                     ((uint32_t)data[i + 2] << 16) | ((uint32_t)data[i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)data[end + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[end + 1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)data[end];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

static PyObject *
py_murmur2(PyObject *module, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int32_t h = murmur2_raw(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromLong(h);
}

static PyObject *
py_murmur2_partition(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "murmur2_partition(key, num_partitions)");
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[1]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n <= 0) {
        PyErr_SetString(PyExc_ZeroDivisionError, "integer modulo by zero");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int32_t h = murmur2_raw(view.buf, view.len);
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t((Py_ssize_t)((uint32_t)h & 0x7fffffffu) % n);
}

/* ------------------------------------------------------------------ BatchBase */

typedef struct {
    PyObject_HEAD
    Py_ssize_t size;       /* estimated bytes held in buffer_memory */
    Py_ssize_t count;      /* records appended */
    char closed;           /* no more appends (full, or taken by the sender) */
    PyObject *append;      /* the record writer's append, or the sealed stand-in */
    PyObject *deliveries;  /* list of (future, callback) or NULL */
} BatchBase;

static PyObject *
batch_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    BatchBase *self = (BatchBase *)type->tp_alloc(type, 0);
    return (PyObject *)self;
}

static int
batch_traverse(BatchBase *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->append);
    Py_VISIT(self->deliveries);
    return 0;
}

static int
batch_clear(BatchBase *self)
{
    Py_CLEAR(self->append);
    Py_CLEAR(self->deliveries);
    return 0;
}

static void
batch_dealloc(BatchBase *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    batch_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyMemberDef batch_members[] = {
    {"size", T_PYSSIZET, offsetof(BatchBase, size), 0, "estimated bytes of the records"},
    {"count", T_PYSSIZET, offsetof(BatchBase, count), 0, "records appended"},
    {"closed", T_BOOL, offsetof(BatchBase, closed), 0, "no more appends"},
    {"append", T_OBJECT, offsetof(BatchBase, append), 0, "the record writer's append"},
    {"deliveries", T_OBJECT, offsetof(BatchBase, deliveries), 0,
     "(future, callback) pairs run at completion, or None"},
    {NULL}};

static PyType_Slot batch_slots[] = {
    {Py_tp_new, batch_new},
    {Py_tp_traverse, batch_traverse},
    {Py_tp_clear, batch_clear},
    {Py_tp_dealloc, batch_dealloc},
    {Py_tp_members, batch_members},
    {Py_tp_doc, "The C fields of a producer batch (strom.producer._batch.ProducerBatch)."},
    {0, NULL}};

static PyType_Spec batch_spec = {
    "strom.producer._native._cproducer.BatchBase", sizeof(BatchBase), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, batch_slots};

/* ------------------------------------------------------------------ AccumulatorBase */

typedef struct {
    PyObject_HEAD
    Py_ssize_t used;
    Py_ssize_t buffer_memory;
    Py_ssize_t batch_size;
} AccumulatorBase;

static PyObject *
acc_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    return type->tp_alloc(type, 0);
}

static int
acc_traverse(PyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    return 0;
}

static void
acc_dealloc(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyMemberDef acc_members[] = {
    {"used", T_PYSSIZET, offsetof(AccumulatorBase, used), 0, "bytes held in buffer_memory"},
    {"buffer_memory", T_PYSSIZET, offsetof(AccumulatorBase, buffer_memory), 0, NULL},
    {"batch_size", T_PYSSIZET, offsetof(AccumulatorBase, batch_size), 0, NULL},
    {NULL}};

static PyType_Slot acc_slots[] = {
    {Py_tp_new, acc_new},
    {Py_tp_traverse, acc_traverse},
    {Py_tp_dealloc, acc_dealloc},
    {Py_tp_members, acc_members},
    {Py_tp_doc, "The C fields of the accumulator (strom.producer._accumulator.Accumulator)."},
    {0, NULL}};

static PyType_Spec acc_spec = {
    "strom.producer._native._cproducer.AccumulatorBase", sizeof(AccumulatorBase), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, acc_slots};

/* ------------------------------------------------------------------ FutureBase */

typedef struct {
    PyObject_HEAD
    PyObject *batch;
    Py_ssize_t index;
    long long timestamp;
    Py_ssize_t key_size;
    Py_ssize_t value_size;
} FutureBase;

static PyObject *
future_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *batch;
    Py_ssize_t index, key_size, value_size;
    long long timestamp;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "RecordFuture takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OnLnn:RecordFuture", &batch, &index, &timestamp, &key_size,
                          &value_size))
        return NULL;
    FutureBase *self = (FutureBase *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->batch = Py_NewRef(batch);
    self->index = index;
    self->timestamp = timestamp;
    self->key_size = key_size;
    self->value_size = value_size;
    return (PyObject *)self;
}

static int
future_traverse(FutureBase *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->batch);
    return 0;
}

static int
future_clear(FutureBase *self)
{
    Py_CLEAR(self->batch);
    return 0;
}

static void
future_dealloc(FutureBase *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    future_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyMemberDef future_members[] = {
    {"_batch", T_OBJECT, offsetof(FutureBase, batch), READONLY, NULL},
    {"_index", T_PYSSIZET, offsetof(FutureBase, index), READONLY, NULL},
    {"_timestamp", T_LONGLONG, offsetof(FutureBase, timestamp), READONLY, NULL},
    {"_key_size", T_PYSSIZET, offsetof(FutureBase, key_size), READONLY, NULL},
    {"_value_size", T_PYSSIZET, offsetof(FutureBase, value_size), READONLY, NULL},
    {NULL}};

static PyType_Slot future_slots[] = {
    {Py_tp_new, future_new},
    {Py_tp_traverse, future_traverse},
    {Py_tp_clear, future_clear},
    {Py_tp_dealloc, future_dealloc},
    {Py_tp_members, future_members},
    {Py_tp_doc, "The C fields of a record future (strom.producer._batch.RecordFuture)."},
    {0, NULL}};

static PyType_Spec future_spec = {
    "strom.producer._native._cproducer.FutureBase", sizeof(FutureBase), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, future_slots};

/* ------------------------------------------------------------------ Ready */

/* What the asyncio producer's fast ``send`` returns: an awaitable (a coroutine by
 * collections.abc.Coroutine's registration) that is already done with ``value``. */
typedef struct {
    PyObject_HEAD
    PyObject *value;  /* NULL once consumed */
} Ready;

static PyTypeObject *ready_type;

static void
ready_dealloc(Ready *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    Py_XDECREF(self->value);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyObject *
ready_self(PyObject *self)
{
    return Py_NewRef(self);
}

static PyObject *
ready_next(Ready *self)
{
    PyObject *value = self->value;
    if (value == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited send()");
        return NULL;
    }
    self->value = NULL;
    if (!PyTuple_Check(value) && !PyExceptionInstance_Check(value)) {
        /* The raw value as StopIteration's: the awaiting frame takes it without creating
         * an exception object (a normalised StopIteration(value) when somebody catches it). */
        PyErr_Restore(Py_NewRef(PyExc_StopIteration), value, NULL);
        return NULL;
    }
    /* StopIteration(value), so that a tuple or exception value is not misread. */
    PyObject *exc = PyObject_CallOneArg(PyExc_StopIteration, value);
    Py_DECREF(value);
    if (exc == NULL)
        return NULL;
    PyErr_SetObject(PyExc_StopIteration, exc);
    Py_DECREF(exc);
    return NULL;
}

static PyObject *
ready_send(Ready *self, PyObject *arg)
{
    return ready_next(self);
}

static PyObject *
ready_throw(Ready *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_CLEAR(self->value);
    if (nargs < 1) {
        PyErr_SetString(PyExc_TypeError, "throw expected at least 1 argument");
        return NULL;
    }
    PyObject *typ = args[0];
    if (PyExceptionInstance_Check(typ)) {
        PyErr_SetObject((PyObject *)Py_TYPE(typ), typ);
    }
    else if (PyExceptionClass_Check(typ)) {
        PyErr_SetObject(typ, nargs > 1 ? args[1] : NULL);
    }
    else {
        PyErr_SetString(PyExc_TypeError, "exceptions must derive from BaseException");
    }
    return NULL;
}

static PyObject *
ready_close(Ready *self, PyObject *unused)
{
    Py_CLEAR(self->value);
    Py_RETURN_NONE;
}

static PyMethodDef ready_methods[] = {
    {"send", (PyCFunction)ready_send, METH_O, NULL},
    {"throw", (PyCFunction)(void (*)(void))ready_throw, METH_FASTCALL, NULL},
    {"close", (PyCFunction)ready_close, METH_NOARGS, NULL},
    {NULL}};

static PyType_Slot ready_slots[] = {
    {Py_tp_dealloc, ready_dealloc},
    {Py_am_await, ready_self},
    {Py_tp_iter, ready_self},
    {Py_tp_iternext, ready_next},
    {Py_tp_methods, ready_methods},
    {Py_tp_doc, "An awaitable that is already done (the asyncio producer's fast send)."},
    {0, NULL}};

static PyType_Spec ready_spec = {
    "strom.producer._native._cproducer.Ready", sizeof(Ready), 0, Py_TPFLAGS_DEFAULT,
    ready_slots};

#define PK_CACHE 64

/* ------------------------------------------------------------------ Lock */

/* The accumulator's lock: threading.Lock's interface (acquire(blocking, timeout), release,
 * locked, the context manager; threading.Condition accepts it), taken by FastSend without a
 * Python call. Uncontended, it never releases the GIL; contended, it waits without it. */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    char locked;
} Lock;

static PyTypeObject *lock_type;

static PyObject *
lock_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) || (kwargs != NULL && PyDict_GET_SIZE(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "Lock() takes no arguments");
        return NULL;
    }
    Lock *self = (Lock *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->lock = PyThread_allocate_lock();
    if (self->lock == NULL) {
        Py_DECREF(self);
        PyErr_SetString(PyExc_MemoryError, "cannot allocate lock");
        return NULL;
    }
    return (PyObject *)self;
}

static void
lock_dealloc(Lock *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (self->lock != NULL) {
        if (self->locked)
            PyThread_release_lock(self->lock);
        PyThread_free_lock(self->lock);
    }
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* 1 acquired, 0 timed out, -1 error (a signal handler raised). */
static int
lock_take(Lock *self, PY_TIMEOUT_T timeout_us)
{
    if (PyThread_acquire_lock_timed(self->lock, 0, 0) == PY_LOCK_ACQUIRED) {
        self->locked = 1;
        return 1;
    }
    if (timeout_us == 0)
        return 0;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    PY_TIMEOUT_T left = timeout_us;
    for (;;) {
        PyLockStatus r;
        Py_BEGIN_ALLOW_THREADS
        r = PyThread_acquire_lock_timed(self->lock, left, 1);
        Py_END_ALLOW_THREADS
        if (r == PY_LOCK_ACQUIRED) {
            self->locked = 1;
            return 1;
        }
        if (r == PY_LOCK_FAILURE)
            return 0;
        /* Interrupted by a signal: run the handlers, then wait for the rest. */
        if (Py_MakePendingCalls() < 0)
            return -1;
        if (timeout_us > 0) {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            PY_TIMEOUT_T spent = (PY_TIMEOUT_T)(now.tv_sec - start.tv_sec) * 1000000 +
                                 (now.tv_nsec - start.tv_nsec) / 1000;
            left = timeout_us - spent;
            if (left <= 0)
                return 0;
        }
    }
}

static PyObject *
lock_acquire(Lock *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    int blocking = 1;
    double timeout = -1;
    Py_ssize_t nk = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs + nk > 2) {
        PyErr_SetString(PyExc_TypeError, "acquire(blocking=True, timeout=-1)");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nargs + nk; i++) {
        int which = (int)i;
        if (i >= nargs) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, i - nargs);
            if (PyUnicode_CompareWithASCIIString(name, "blocking") == 0)
                which = 0;
            else if (PyUnicode_CompareWithASCIIString(name, "timeout") == 0)
                which = 1;
            else {
                PyErr_Format(PyExc_TypeError, "acquire() got an unexpected keyword '%U'", name);
                return NULL;
            }
        }
        if (which == 0) {
            blocking = PyObject_IsTrue(args[i]);
            if (blocking < 0)
                return NULL;
        }
        else {
            timeout = PyFloat_AsDouble(args[i]);
            if (timeout == -1 && PyErr_Occurred())
                return NULL;
        }
    }
    if (!blocking && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "can't specify a timeout for a non-blocking call");
        return NULL;
    }
    if (timeout < 0 && timeout != -1) {
        PyErr_SetString(PyExc_ValueError, "timeout value must be a non-negative number");
        return NULL;
    }
    PY_TIMEOUT_T us = !blocking ? 0 : timeout < 0 ? -1 : (PY_TIMEOUT_T)(timeout * 1e6);
    if (blocking && timeout > 0 && us == 0)
        us = 1;
    int r = lock_take(self, us);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static inline int
lock_give(Lock *self)
{
    if (!self->locked) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return -1;
    }
    self->locked = 0;
    PyThread_release_lock(self->lock);
    return 0;
}

static PyObject *
lock_release(Lock *self, PyObject *unused)
{
    if (lock_give(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
lock_enter(Lock *self, PyObject *unused)
{
    int r = lock_take(self, -1);
    if (r < 0)
        return NULL;
    return PyBool_FromLong(r);
}

static PyObject *
lock_exit(Lock *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (lock_give(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
lock_locked(Lock *self, PyObject *unused)
{
    return PyBool_FromLong(self->locked);
}

static PyMethodDef lock_methods[] = {
    {"acquire", (PyCFunction)(void (*)(void))lock_acquire, METH_FASTCALL | METH_KEYWORDS,
     "acquire(blocking=True, timeout=-1) -> bool"},
    {"release", (PyCFunction)lock_release, METH_NOARGS, NULL},
    {"locked", (PyCFunction)lock_locked, METH_NOARGS, NULL},
    {"__enter__", (PyCFunction)lock_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))lock_exit, METH_FASTCALL, NULL},
    {NULL}};

static PyType_Slot lock_slots[] = {
    {Py_tp_new, lock_new},
    {Py_tp_dealloc, lock_dealloc},
    {Py_tp_methods, lock_methods},
    {Py_tp_doc, "A non-reentrant lock with threading.Lock's interface (the accumulator's)."},
    {0, NULL}};

static PyType_Spec lock_spec = {
    "strom.producer._native._cproducer.Lock", sizeof(Lock), 0, Py_TPFLAGS_DEFAULT, lock_slots};

/* ------------------------------------------------------------------ FastSend */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    AccumulatorBase *acc;     /* the Accumulator */
    PyObject *queues;         /* acc._queues: dict (topic, partition) -> deque of batches */
    Lock *lock;               /* acc._lock */
    PyObject *sender_dict;    /* the Sender's __dict__ (its ``fatal``) */
    PyObject *txn_dict;       /* the TransactionManager's __dict__ (its ``block``), or NULL */
    PyObject *fresh_batch;    /* acc._fresh_batch(pk): close the open batch, open a new one */
    PyObject *metadata;       /* cluster.cached_topics: dict topic -> partitions */
    PyObject *sticky;         /* StickyPartitioner._current: dict topic -> partition */
    PyObject *sticky_next;    /* StickyPartitioner.next */
    PyObject *sender;         /* the Sender (its ``fatal``) */
    PyObject *txn;            /* the TransactionManager (its ``block``), or NULL */
    PyObject *fallback;       /* the pure-Python send */
    PyTypeObject *future_type; /* RecordFuture (a FutureBase subclass) */
    Py_ssize_t max_record;
    int awaitable;            /* return Ready(future) (the asyncio producer) */
    PyObject *pk_cache[PK_CACHE]; /* (topic, partition) keys of acc._queues, reused */
} FastSend;

static PyObject *str_fatal, *str_block, *str_wakeup;

static int
fast_traverse(FastSend *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->acc);
    Py_VISIT(self->queues);
    Py_VISIT(self->lock);
    Py_VISIT(self->sender_dict);
    Py_VISIT(self->txn_dict);
    Py_VISIT(self->fresh_batch);
    Py_VISIT(self->metadata);
    Py_VISIT(self->sticky);
    Py_VISIT(self->sticky_next);
    Py_VISIT(self->sender);
    Py_VISIT(self->txn);
    Py_VISIT(self->fallback);
    Py_VISIT(self->future_type);
    for (int i = 0; i < PK_CACHE; i++)
        Py_VISIT(self->pk_cache[i]);
    return 0;
}

static int
fast_clear(FastSend *self)
{
    Py_CLEAR(self->acc);
    Py_CLEAR(self->queues);
    Py_CLEAR(self->lock);
    Py_CLEAR(self->sender_dict);
    Py_CLEAR(self->txn_dict);
    Py_CLEAR(self->fresh_batch);
    Py_CLEAR(self->metadata);
    Py_CLEAR(self->sticky);
    Py_CLEAR(self->sticky_next);
    Py_CLEAR(self->sender);
    Py_CLEAR(self->txn);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->future_type);
    for (int i = 0; i < PK_CACHE; i++)
        Py_CLEAR(self->pk_cache[i]);
    return 0;
}

static void
fast_dealloc(FastSend *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    fast_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyTypeObject *acc_type, *batch_type, *future_base_type;

/* The record codec's C append (strom.records._native._crecords._append_api) and its
 * RecordsWriter type: a batch whose ``append`` is a RecordsWriter's bound method is appended
 * to through it. */
typedef int (*writer_append_fn)(PyObject *, PyObject *, PyObject *, PyObject *, PyObject *,
                                Py_ssize_t *);
static writer_append_fn writer_append;
static PyTypeObject *writer_type;

static PyObject *fast_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames);

static PyObject *
fast_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"accumulator", "queues", "lock", "fresh_batch", "metadata",
                            "sticky", "sticky_next", "sender", "txn", "fallback",
                            "future_type", "max_record", "awaitable", NULL};
    PyObject *acc, *queues, *lock, *fresh, *metadata, *sticky, *sticky_next, *sender, *txn;
    PyObject *fallback, *future_type;
    Py_ssize_t max_record;
    int awaitable;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO!OOO!O!OOOOO!np:FastSend", names, &acc,
                                     &PyDict_Type, &queues, &lock, &fresh, &PyDict_Type,
                                     &metadata, &PyDict_Type, &sticky, &sticky_next, &sender,
                                     &txn, &fallback, &PyType_Type, &future_type, &max_record,
                                     &awaitable))
        return NULL;
    if (!PyObject_TypeCheck(acc, acc_type)) {
        PyErr_SetString(PyExc_TypeError, "accumulator must extend AccumulatorBase");
        return NULL;
    }
    if (!PyType_IsSubtype((PyTypeObject *)future_type, future_base_type)) {
        PyErr_SetString(PyExc_TypeError, "future_type must extend FutureBase");
        return NULL;
    }
    if (!PyObject_TypeCheck(lock, lock_type)) {
        PyErr_SetString(PyExc_TypeError, "lock must be a _cproducer.Lock");
        return NULL;
    }
    FastSend *self = (FastSend *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    /* The instance dicts, when there are (a read of ``fatal`` / ``block`` without the
     * attribute machinery; otherwise getattr). */
    PyObject **dictptr = _PyObject_GetDictPtr(sender);
    self->sender_dict = dictptr != NULL && *dictptr != NULL ? Py_NewRef(*dictptr) : NULL;
    if (txn != Py_None) {
        dictptr = _PyObject_GetDictPtr(txn);
        self->txn_dict = dictptr != NULL && *dictptr != NULL ? Py_NewRef(*dictptr) : NULL;
    }
    self->vectorcall = fast_vectorcall;
    self->acc = (AccumulatorBase *)Py_NewRef(acc);
    self->queues = Py_NewRef(queues);
    self->lock = (Lock *)Py_NewRef(lock);
    self->fresh_batch = Py_NewRef(fresh);
    self->metadata = Py_NewRef(metadata);
    self->sticky = Py_NewRef(sticky);
    self->sticky_next = Py_NewRef(sticky_next);
    self->sender = Py_NewRef(sender);
    self->txn = txn == Py_None ? NULL : Py_NewRef(txn);
    self->fallback = Py_NewRef(fallback);
    self->future_type = (PyTypeObject *)Py_NewRef(future_type);
    self->max_record = max_record;
    self->awaitable = awaitable;
    return (PyObject *)self;
}

/* The parameters of send(), in order. */
enum { A_TOPIC, A_VALUE, A_KEY, A_HEADERS, A_PARTITION, A_TIMESTAMP, A_ON_DELIVERY, N_ARGS };
static const char *const arg_names[N_ARGS] = {"topic", "value", "key", "headers",
                                               "partition", "timestamp_ms", "on_delivery"};
static PyObject *arg_strs[N_ARGS];

/* Is ``obj`` None or exact bytes? */
#define NONE_OR_BYTES(obj) ((obj) == Py_None || PyBytes_CheckExact(obj))

/* Estimated size of the headers (record_size's rule), or -1 when they are not the plain
 * (str, bytes | None) pairs the fast path takes. */
static Py_ssize_t
headers_size(PyObject *headers)
{
    if (!PyList_CheckExact(headers) && !PyTuple_CheckExact(headers))
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(headers);
    PyObject **items = PySequence_Fast_ITEMS(headers);
    Py_ssize_t size = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = items[i];
        if (!PyTuple_CheckExact(pair) || PyTuple_GET_SIZE(pair) != 2)
            return -1;
        PyObject *name = PyTuple_GET_ITEM(pair, 0), *data = PyTuple_GET_ITEM(pair, 1);
        if (!PyUnicode_CheckExact(name) || !NONE_OR_BYTES(data))
            return -1;
        size += PyUnicode_GET_LENGTH(name) + (data == Py_None ? 0 : PyBytes_GET_SIZE(data)) + 4;
    }
    return size;
}

static inline long long
wall_clock_ms(void)
{
    /* int(time.time() * 1000), as the Python path computes it. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    return (long long)(now * 1000.0);
}

static PyObject *
fast_fallback(FastSend *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    return PyObject_Vectorcall(self->fallback, args, nargsf, kwnames);
}

/* Attribute ``name`` of ``obj`` is not None (-1 on error); read from ``dict`` when it
 * holds the name. */
static inline int
attr_set(PyObject *obj, PyObject *dict, PyObject *name)
{
    if (dict != NULL) {
        PyObject *found = PyDict_GetItemWithError(dict, name);  /* borrowed */
        if (found != NULL)
            return found != Py_None;
        if (PyErr_Occurred())
            return -1;
    }
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    int set = value != Py_None;
    Py_DECREF(value);
    return set;
}

static PyObject *
fast_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    FastSend *self = (FastSend *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *a[N_ARGS] = {NULL, Py_None, Py_None, Py_None, Py_None, Py_None, Py_None};
    if (nargs > N_ARGS)
        return fast_fallback(self, args, nargsf, kwnames);
    for (Py_ssize_t i = 0; i < nargs; i++)
        a[i] = args[i];
    if (kwnames != NULL) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t j = 0; j < nk; j++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, j);
            int found = 0;
            for (int i = (int)nargs; i < N_ARGS; i++) {
                if (name == arg_strs[i] || PyUnicode_Compare(name, arg_strs[i]) == 0) {
                    a[i] = args[nargs + j];
                    found = 1;
                    break;
                }
            }
            if (!found)
                return fast_fallback(self, args, nargsf, kwnames);  /* the TypeError */
        }
    }
    PyObject *topic = a[A_TOPIC], *value = a[A_VALUE], *key = a[A_KEY];
    PyObject *headers = a[A_HEADERS], *on_delivery = a[A_ON_DELIVERY];
    if (topic == NULL || !PyUnicode_CheckExact(topic) || !NONE_OR_BYTES(value) ||
        !NONE_OR_BYTES(key))
        return fast_fallback(self, args, nargsf, kwnames);
    int set = attr_set(self->sender, self->sender_dict, str_fatal);
    if (set != 0)
        return set < 0 ? NULL : fast_fallback(self, args, nargsf, kwnames);
    if (self->txn != NULL) {
        set = attr_set(self->txn, self->txn_dict, str_block);
        if (set != 0)
            return set < 0 ? NULL : fast_fallback(self, args, nargsf, kwnames);
    }
    Py_ssize_t key_size = key == Py_None ? -1 : PyBytes_GET_SIZE(key);
    Py_ssize_t value_size = value == Py_None ? -1 : PyBytes_GET_SIZE(value);
    Py_ssize_t size = RECORD_OVERHEAD + (key_size > 0 ? key_size : 0) +
                      (value_size > 0 ? value_size : 0);
    if (headers != Py_None) {
        Py_ssize_t hsize = headers_size(headers);
        if (hsize < 0)
            return fast_fallback(self, args, nargsf, kwnames);
        size += hsize;
    }
    if (size > self->max_record)
        return fast_fallback(self, args, nargsf, kwnames);
    PyObject *partitions = PyDict_GetItemWithError(self->metadata, topic);  /* borrowed */
    if (partitions == NULL) {
        if (PyErr_Occurred())
            return NULL;
        return fast_fallback(self, args, nargsf, kwnames);
    }
    Py_ssize_t count = PyTuple_CheckExact(partitions) ? PyTuple_GET_SIZE(partitions)
                                                      : PyObject_Length(partitions);
    if (count <= 0)
        return count < 0 ? NULL : fast_fallback(self, args, nargsf, kwnames);
    Py_ssize_t partition;
    int sticky = 0;
    if (a[A_PARTITION] != Py_None) {
        if (!PyLong_CheckExact(a[A_PARTITION]))
            return fast_fallback(self, args, nargsf, kwnames);
        int overflow;
        long long p = PyLong_AsLongLongAndOverflow(a[A_PARTITION], &overflow);
        if (overflow || p < 0 || p >= count)
            return fast_fallback(self, args, nargsf, kwnames);  /* its error */
        partition = (Py_ssize_t)p;
    }
    else if (key != Py_None) {
        int32_t h = murmur2_raw((const uint8_t *)PyBytes_AS_STRING(key), key_size);
        partition = (Py_ssize_t)((uint32_t)h & 0x7fffffffu) % count;
    }
    else {
        PyObject *current = PyDict_GetItemWithError(self->sticky, topic);  /* borrowed */
        if (current == NULL) {
            if (PyErr_Occurred())
                return NULL;
            return fast_fallback(self, args, nargsf, kwnames);  /* picks the first one */
        }
        partition = PyLong_AsSsize_t(current);
        if (partition == -1 && PyErr_Occurred())
            return NULL;
        if (partition < 0 || partition >= count)
            return fast_fallback(self, args, nargsf, kwnames);
        sticky = 1;
    }
    PyObject *ts_obj;
    long long timestamp;
    if (a[A_TIMESTAMP] == Py_None) {
        timestamp = wall_clock_ms();
        ts_obj = PyLong_FromLongLong(timestamp);
        if (ts_obj == NULL)
            return NULL;
    }
    else {
        if (!PyLong_CheckExact(a[A_TIMESTAMP]))
            return fast_fallback(self, args, nargsf, kwnames);
        int overflow;
        timestamp = PyLong_AsLongLongAndOverflow(a[A_TIMESTAMP], &overflow);
        if (overflow)
            return fast_fallback(self, args, nargsf, kwnames);  /* the writer's error */
        ts_obj = Py_NewRef(a[A_TIMESTAMP]);
    }
    /* The queue's key (topic, partition): a cached tuple when this topic object and
     * partition came before (no allocation, and the dict lookup compares by identity). */
    size_t slot = ((size_t)topic >> 4) * 31u + (size_t)partition;
    slot &= PK_CACHE - 1;
    PyObject *pk = self->pk_cache[slot];
    if (pk != NULL && PyTuple_GET_ITEM(pk, 0) == topic &&
        PyLong_AsSsize_t(PyTuple_GET_ITEM(pk, 1)) == partition) {
        Py_INCREF(pk);
    }
    else {
        PyObject *pobj = PyLong_FromSsize_t(partition);
        pk = pobj == NULL ? NULL : PyTuple_Pack(2, topic, pobj);
        Py_XDECREF(pobj);
        if (pk == NULL) {
            Py_DECREF(ts_obj);
            return NULL;
        }
        Py_XSETREF(self->pk_cache[slot], Py_NewRef(pk));
    }

    /* -- under the accumulator's lock -- */
    if (lock_take(self->lock, -1) < 0) {
        Py_DECREF(pk);
        Py_DECREF(ts_obj);
        return NULL;
    }
    AccumulatorBase *acc = self->acc;
    BatchBase *batch = NULL;
    PyObject *future = NULL;
    int wake = 0, fallback = 0;
    if (acc->used + size > acc->buffer_memory) {
        fallback = 1;  /* NeedRoom: the caller waits in its own way */
        goto unlock;
    }
    PyObject *queue = PyDict_GetItemWithError(self->queues, pk);  /* borrowed */
    if (queue == NULL && PyErr_Occurred())
        goto unlock;
    if (queue != NULL) {
        Py_ssize_t n = PyObject_Length(queue);
        if (n < 0)
            goto unlock;
        if (n > 0) {
            batch = (BatchBase *)PySequence_GetItem(queue, n - 1);
            if (batch == NULL)
                goto unlock;
            if (!PyObject_TypeCheck((PyObject *)batch, batch_type)) {
                PyErr_SetString(PyExc_TypeError, "a queued batch is not a BatchBase");
                Py_CLEAR(batch);
                goto unlock;
            }
            if (batch->closed || batch->size + size > acc->batch_size)
                Py_CLEAR(batch);
        }
    }
    if (batch == NULL) {
        batch = (BatchBase *)PyObject_CallOneArg(self->fresh_batch, pk);
        if (batch == NULL)
            goto unlock;
        if (!PyObject_TypeCheck((PyObject *)batch, batch_type)) {
            PyErr_SetString(PyExc_TypeError, "_fresh_batch() did not return a BatchBase");
            Py_CLEAR(batch);
            goto unlock;
        }
        wake = 1;
    }
    {
        Py_ssize_t index;
        PyObject *append = batch->append;
        if (append != NULL && PyCFunction_Check(append) &&
            Py_TYPE(PyCFunction_GET_SELF(append)) == writer_type) {
            if (writer_append(PyCFunction_GET_SELF(append), ts_obj, key, value, headers,
                              &index) < 0)
                index = -1;
        }
        else {
            PyObject *wargs[4] = {ts_obj, key, value, headers};
            PyObject *index_obj = append == NULL ? NULL : PyObject_Vectorcall(append, wargs, 4, NULL);
            index = index_obj == NULL ? -1 : PyLong_AsSsize_t(index_obj);
            Py_XDECREF(index_obj);
        }
        if (index < 0) {
            /* A bad record: the Python path raises the same error and drops an empty batch. */
            PyErr_Clear();
            fallback = 1;
            Py_CLEAR(batch);
            goto unlock;
        }
        batch->count = index + 1;
        batch->size += size;
        acc->used += size;
        if (batch->size >= acc->batch_size) {
            batch->closed = 1;
            wake = 1;
        }
        FutureBase *f = (FutureBase *)self->future_type->tp_alloc(self->future_type, 0);
        if (f == NULL)
            goto unlock;
        f->batch = Py_NewRef((PyObject *)batch);
        f->index = index;
        f->timestamp = timestamp;
        f->key_size = key_size;
        f->value_size = value_size;
        future = (PyObject *)f;
        if (on_delivery != Py_None) {
            /* Registered while the batch is still queued: it cannot have completed. */
            if (batch->deliveries == NULL || batch->deliveries == Py_None) {
                PyObject *list = PyList_New(0);
                if (list == NULL) {
                    Py_CLEAR(future);
                    goto unlock;
                }
                Py_XSETREF(batch->deliveries, list);
            }
            PyObject *pair = PyTuple_Pack(2, future, on_delivery);
            if (pair == NULL || PyList_Append(batch->deliveries, pair) < 0) {
                Py_XDECREF(pair);
                Py_CLEAR(future);
                goto unlock;
            }
            Py_DECREF(pair);
        }
    }
unlock:
    self->lock->locked = 0;
    PyThread_release_lock(self->lock->lock);
    Py_DECREF(pk);
    Py_DECREF(ts_obj);
    if (fallback) {
        Py_XDECREF(future);
        Py_XDECREF(batch);
        return fast_fallback(self, args, nargsf, kwnames);
    }
    if (future == NULL) {
        Py_XDECREF(batch);
        return NULL;
    }
    if (wake) {
        PyObject *wakeup = PyObject_GetAttr((PyObject *)acc, str_wakeup);
        PyObject *r = wakeup == NULL ? NULL : PyObject_CallNoArgs(wakeup);
        Py_XDECREF(wakeup);
        if (r == NULL) {
            Py_DECREF(batch);
            Py_DECREF(future);
            return NULL;
        }
        Py_DECREF(r);
    }
    if (sticky && batch->closed) {
        PyObject *cargs[3] = {topic, NULL, NULL};
        cargs[1] = PyLong_FromSsize_t(count);
        cargs[2] = PyLong_FromSsize_t(partition);
        PyObject *r = NULL;
        if (cargs[1] != NULL && cargs[2] != NULL)
            r = PyObject_Vectorcall(self->sticky_next, cargs, 3, NULL);
        Py_XDECREF(cargs[1]);
        Py_XDECREF(cargs[2]);
        if (r == NULL) {
            Py_DECREF(batch);
            Py_DECREF(future);
            return NULL;
        }
        Py_DECREF(r);
    }
    Py_DECREF(batch);
    if (!self->awaitable)
        return future;
    Ready *ready = PyObject_New(Ready, ready_type);
    if (ready == NULL) {
        Py_DECREF(future);
        return NULL;
    }
    ready->value = future;
    return (PyObject *)ready;
}

static PyObject *
fast_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    return PyVectorcall_Call(self, args, kwargs);
}

static PyMemberDef fast_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(FastSend, vectorcall), READONLY},
    {"fallback", T_OBJECT, offsetof(FastSend, fallback), READONLY,
     "the pure-Python send this one hands unusual records to"},
    {NULL}};

static PyType_Slot fast_slots[] = {
    {Py_tp_new, fast_new},
    {Py_tp_traverse, fast_traverse},
    {Py_tp_clear, fast_clear},
    {Py_tp_dealloc, fast_dealloc},
    {Py_tp_call, fast_call},
    {Py_tp_members, fast_members},
    {Py_tp_doc, "send(topic, value=None, key=None, headers=None, partition=None, "
                "timestamp_ms=None, on_delivery=None): the producer's per-record fast path."},
    {0, NULL}};

static PyType_Spec fast_spec = {
    "strom.producer._native._cproducer.FastSend", sizeof(FastSend), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, fast_slots};

/* ------------------------------------------------------------------ module */

static PyObject *
py_append_floor(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    /* The floor of a call of send()'s shape: (bytearray, topic, value) -> len; appends the
     * value to the bytearray and nothing else (bench/producer_send.py). */
    if (nargs < 3 || !PyByteArray_CheckExact(args[0]) || !PyBytes_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "append_floor(bytearray, topic, bytes)");
        return NULL;
    }
    PyObject *buf = args[0];
    Py_ssize_t n = PyByteArray_GET_SIZE(buf), len = PyBytes_GET_SIZE(args[2]);
    if (PyByteArray_Resize(buf, n + len) < 0)
        return NULL;
    memcpy(PyByteArray_AS_STRING(buf) + n, PyBytes_AS_STRING(args[2]), len);
    return PyLong_FromSsize_t(n);
}

static PyMethodDef module_methods[] = {
    {"murmur2", py_murmur2, METH_O, "Kafka's murmur2: the signed 32-bit hash of a buffer."},
    {"murmur2_partition", (PyCFunction)(void (*)(void))py_murmur2_partition, METH_FASTCALL,
     "(murmur2(key) & 0x7fffffff) % num_partitions"},
    {"append_floor", (PyCFunction)(void (*)(void))py_append_floor, METH_FASTCALL,
     "append_floor(buf, topic, value): the floor of a send()-shaped C call (benchmarks)."},
    {NULL}};

static int
add_type(PyObject *module, PyType_Spec *spec, PyObject *base, PyTypeObject **out)
{
    PyObject *type = PyType_FromModuleAndSpec(module, spec, base);
    if (type == NULL)
        return -1;
    if (PyModule_AddObjectRef(module, strrchr(spec->name, '.') + 1, type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    *out = (PyTypeObject *)type;  /* the module keeps a reference */
    Py_DECREF(type);
    return 0;
}

static int
module_exec(PyObject *module)
{
    PyTypeObject *fast_type;
    if (add_type(module, &batch_spec, NULL, &batch_type) < 0 ||
        add_type(module, &acc_spec, NULL, &acc_type) < 0 ||
        add_type(module, &future_spec, NULL, &future_base_type) < 0 ||
        add_type(module, &ready_spec, NULL, &ready_type) < 0 ||
        add_type(module, &lock_spec, NULL, &lock_type) < 0 ||
        add_type(module, &fast_spec, NULL, &fast_type) < 0)
        return -1;
    for (int i = 0; i < N_ARGS; i++) {
        arg_strs[i] = PyUnicode_InternFromString(arg_names[i]);
        if (arg_strs[i] == NULL)
            return -1;
    }
    writer_append = (writer_append_fn)PyCapsule_Import(
        "strom.records._native._crecords._append_api", 0);
    if (writer_append == NULL)
        return -1;
    PyObject *crecords = PyImport_ImportModule("strom.records._native._crecords");
    if (crecords == NULL)
        return -1;
    writer_type = (PyTypeObject *)PyObject_GetAttrString(crecords, "RecordsWriter");
    Py_DECREF(crecords);
    if (writer_type == NULL)
        return -1;
    str_fatal = PyUnicode_InternFromString("fatal");
    str_block = PyUnicode_InternFromString("block");
    str_wakeup = PyUnicode_InternFromString("wakeup");
    if (str_fatal == NULL || str_block == NULL || str_wakeup == NULL)
        return -1;
    return 0;
}

static PyModuleDef_Slot module_slots[] = {{Py_mod_exec, module_exec}, {0, NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "strom.producer._native._cproducer",
    "The C twin of the producer's per-record send path (see strom.producer._native).",
    0,
    module_methods,
    module_slots,
};

PyMODINIT_FUNC
PyInit__cproducer(void)
{
    return PyModuleDef_Init(&module_def);
}
