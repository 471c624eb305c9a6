/*
 * broker._speedups, send part: a single SEND_MESSAGE(_V2) of the common shape, from its header's extFields to its
 * whole CommitLog record, in one call (broker/server/processors/send_record.py's ``send_record``; Python twin
 * ``_send_record_py``, which tests/unit/test_speedups_send_record.py holds to the same output and to the record the
 * general path stores).
 *
 * The general path parses the header into a dataclass, checks it, decodes the properties into a dict, adds the
 * broker's (MSG_REGION, TRACE_ON, CLUSTER), orders them as Java's HashMap(128) iterates, builds a StoreMessage and
 * encodes it at the put: a third of a single send's work on the broker's one loop thread (bench/request_cost.py).
 * Here the same record is one pass over the header's strings. Anything out of the common shape answers None and takes the general path, which also names
 * what is wrong: a field missing or not a plain decimal, a batch, a transaction (sysFlag or TRAN_MSG), DELAY,
 * POP_CK, no UNIQ_KEY, a property name that is not ASCII, more than MAX_ENTRIES properties, a limit passed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_speedups.h"

/* The header fields read, in the order of the names tuple (send_record.SEND_RECORD_FIELDS); those before
 * F_OPTIONAL are required (@CFNotNull). */
enum {
    F_PRODUCER_GROUP, F_TOPIC, F_DEFAULT_TOPIC, F_DEFAULT_TOPIC_QUEUE_NUMS, F_QUEUE_ID, F_SYS_FLAG, F_BORN_TIMESTAMP,
    F_FLAG, F_OPTIONAL, F_PROPERTIES = F_OPTIONAL, F_RECONSUME_TIMES, F_MAX_RECONSUME_TIMES, F_BATCH, F_COUNT
};
#define MAX_ENTRIES 64  /* properties of a message this path takes (a map of 64 stays at capacity 128) */

/* ``text`` as int() reads it when it is a plain decimal (an optional '-', 1 to 18 digits) within [lo, hi]; 0 for
 * anything else (int() takes more: spaces, '+', '_'; the general path reads those). */
static int plain_decimal(PyObject *text, long long lo, long long hi, long long *out) {
    if (!PyUnicode_Check(text) || !PyUnicode_IS_ASCII(text))
        return 0;
    const char *p = (const char *)PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), i = n > 0 && p[0] == '-';
    if (i == n || n - i > 18)
        return 0;
    long long value = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        value = value * 10 + (p[i] - '0');
    }
    if (p[0] == '-')
        value = -value;
    if (value < lo || value > hi)
        return 0;
    *out = value;
    return 1;
}

/* UTF-8 of a str (a view the str keeps); 0 when it is not a str or holds a lone surrogate. */
static int utf8_of(PyObject *text, Span *out) {
    if (!PyUnicode_Check(text))
        return 0;
    const char *p = PyUnicode_AsUTF8AndSize(text, &out->n);
    if (p == NULL) {
        PyErr_Clear();
        return 0;
    }
    out->p = (const uint8_t *)p;
    return 1;
}

typedef struct {
    Span name, value;
} Entry;

typedef struct {
    Entry at[MAX_ENTRIES];
    int count;
} Entries;

/* Java's map.put: a name already there keeps its place and takes the value; 0 when the map is full. */
static int put_entry(Entries *entries, Span name, Span value) {
    for (int i = 0; i < entries->count; i++) {
        if (entries->at[i].name.n == name.n && memcmp(entries->at[i].name.p, name.p, (size_t)name.n) == 0) {
            entries->at[i].value = value;
            return 1;
        }
    }
    if (entries->count == MAX_ENTRIES)
        return 0;
    entries->at[entries->count++] = (Entry){name, value};
    return 1;
}

/* The producer's PROPERTIES as MessageDecoder.string2messageProperties keeps them (name and value non-empty, the
 * last value of a name); 0 when one is out of the common shape (see the file's head). */
static int producer_entries(Span text, Entries *entries) {
    static const char *const GENERAL_NAMES[] = {"DELAY", "TRAN_MSG", "POP_CK"};
    PropertyWalk walk = property_walk(text.p, text.n);
    Span name, value;
    while (next_property(&walk, &name, &value)) {
        for (Py_ssize_t i = 0; i < name.n; i++) {
            if (name.p[i] >= 0x80)
                return 0;
        }
        for (size_t i = 0; i < sizeof(GENERAL_NAMES) / sizeof(GENERAL_NAMES[0]); i++) {
            if (span_equals(name, GENERAL_NAMES[i]))
                return 0;
        }
        if (!put_entry(entries, name, value))
            return 0;
    }
    return 1;
}

/* HashMap.hash of an ASCII String key: String.hashCode with its high half folded in. */
static uint32_t spread_hash(Span name) {
    uint32_t h = 0;
    for (Py_ssize_t i = 0; i < name.n; i++)
        h = 31 * h + name.p[i];
    return (h ^ (h >> 16)) & 0x7FFFFFFF;
}

/* The entries in the iteration order of a Java HashMap of ``capacity`` they were put into in order
 * (message_properties.java_ordered): by bin, then by insertion. */
static void java_order(Entries *entries, uint32_t capacity) {
    uint32_t bins[MAX_ENTRIES];
    while ((uint64_t)entries->count > (uint64_t)capacity * 3 / 4)
        capacity <<= 1;
    for (int i = 0; i < entries->count; i++)
        bins[i] = spread_hash(entries->at[i].name) & (capacity - 1);
    for (int i = 1; i < entries->count; i++) {  /* insertion sort: stable, and a message has a handful */
        Entry entry = entries->at[i];
        uint32_t bin = bins[i];
        int j = i - 1;
        for (; j >= 0 && bins[j] > bin; j--) {
            entries->at[j + 1] = entries->at[j];
            bins[j + 1] = bins[j];
        }
        entries->at[j + 1] = entry;
        bins[j + 1] = bin;
    }
}

static const uint8_t NAME_VALUE_SEPARATOR = 0x01, PROPERTY_SEPARATOR = 0x02;

PyDoc_STRVAR(send_record_doc,
"send_record(ext_fields, names, body, queue_limit, sys_flag_bits, born_host, store_host, region, trace_on, cluster,\n"
"            max_body, max_record, map_capacity) -> (record, queue_id, uniq_key) | None\n\n"
"The CommitLog record (a bytearray, encoded ahead) of a single send whose header's extFields are ``ext_fields``\n"
"(read under ``names``, send_record.SEND_RECORD_FIELDS), its queue id and UNIQ_KEY; None when the send is not of the\n"
"common shape or a limit is passed. ``queue_limit``: the topic's larger queue count; ``sys_flag_bits``: what the\n"
"topic adds to the sysFlag (MULTI_TAGS).");

static PyObject *send_record(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 13 || !PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) != F_COUNT || !PyBytes_Check(args[5]) ||
        !PyBytes_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError, "send_record(ext_fields, tuple of the fields' names, body, int, int, bytes, "
                                         "bytes, str, str, str, int, int, int)");
        return NULL;
    }
    if (!PyDict_Check(args[0]))  /* extFields as another mapping: the general path reads it */
        Py_RETURN_NONE;
    long long queue_limit = PyLong_AsLongLong(args[3]), sys_flag_bits = PyLong_AsLongLong(args[4]);
    Py_ssize_t max_body = PyLong_AsSsize_t(args[10]), max_record = PyLong_AsSsize_t(args[11]);
    long long capacity = PyLong_AsLongLong(args[12]);
    if (PyErr_Occurred())
        return NULL;
    PyObject *values[F_COUNT];
    for (int i = 0; i < F_COUNT; i++) {
        values[i] = PyDict_GetItemWithError(args[0], PyTuple_GET_ITEM(args[1], i));  /* borrowed */
        if (values[i] == NULL && PyErr_Occurred())
            return NULL;
        if (values[i] == NULL ? i < F_OPTIONAL : !PyUnicode_Check(values[i]))
            Py_RETURN_NONE;
    }
    long long number, queue_id, sys_flag, born_timestamp, flag, reconsume_times = 0;
    if (!plain_decimal(values[F_DEFAULT_TOPIC_QUEUE_NUMS], LLONG_MIN, LLONG_MAX, &number) ||
        !plain_decimal(values[F_QUEUE_ID], 0, queue_limit - 1, &queue_id) ||
        !plain_decimal(values[F_SYS_FLAG], 0, INT32_MAX, &sys_flag) || (sys_flag & TX_MASK) ||
        !plain_decimal(values[F_BORN_TIMESTAMP], LLONG_MIN, LLONG_MAX, &born_timestamp) ||
        !plain_decimal(values[F_FLAG], INT32_MIN, INT32_MAX, &flag) ||
        (values[F_RECONSUME_TIMES] && !plain_decimal(values[F_RECONSUME_TIMES], INT32_MIN, INT32_MAX,
                                                     &reconsume_times)) ||
        (values[F_MAX_RECONSUME_TIMES] && !plain_decimal(values[F_MAX_RECONSUME_TIMES], LLONG_MIN, LLONG_MAX,
                                                         &number)))
        Py_RETURN_NONE;
    if (values[F_BATCH] != NULL) {  /* Boolean.parseBoolean: "true" in any case is a batch */
        PyObject *batch = values[F_BATCH];
        if (!PyUnicode_IS_ASCII(batch) ||
            (PyUnicode_GET_LENGTH(batch) == 4 && PyOS_strnicmp((const char *)PyUnicode_DATA(batch), "true", 4) == 0))
            Py_RETURN_NONE;
    }
    Span topic, props_text = {NULL, 0}, region, trace_on, cluster, uniq = {NULL, 0};
    Span born_host = {(const uint8_t *)PyBytes_AS_STRING(args[5]), PyBytes_GET_SIZE(args[5])};
    Span store_host = {(const uint8_t *)PyBytes_AS_STRING(args[6]), PyBytes_GET_SIZE(args[6])};
    if (!utf8_of(values[F_TOPIC], &topic) || topic.n > TOPIC_V2_MAX ||
        (values[F_PROPERTIES] && !utf8_of(values[F_PROPERTIES], &props_text)) || !utf8_of(args[7], &region) ||
        !utf8_of(args[8], &trace_on) || !utf8_of(args[9], &cluster) ||
        (born_host.n != HOST_V4_LENGTH && born_host.n != HOST_V6_LENGTH) ||
        (store_host.n != HOST_V4_LENGTH && store_host.n != HOST_V6_LENGTH) || capacity <= 0 ||
        capacity > (1 << 30) || (capacity & (capacity - 1)))
        Py_RETURN_NONE;
    static const Span MSG_REGION = {(const uint8_t *)"MSG_REGION", 10}, TRACE_ON = {(const uint8_t *)"TRACE_ON", 8};
    static const Span CLUSTER = {(const uint8_t *)"CLUSTER", 7};
    Entries entries = {.count = 0};
    /* SendMessageProcessor's order: the producer's entries, MSG_REGION, TRACE_ON, (UNIQ_KEY: here always there),
     * CLUSTER */
    if (!producer_entries(props_text, &entries) || !put_entry(&entries, MSG_REGION, region) ||
        !put_entry(&entries, TRACE_ON, trace_on) || !put_entry(&entries, CLUSTER, cluster))
        Py_RETURN_NONE;
    Py_ssize_t props_len = 0;
    for (int i = 0; i < entries.count; i++) {
        props_len += entries.at[i].name.n + entries.at[i].value.n + 2;
        if (span_equals(entries.at[i].name, "UNIQ_KEY"))
            uniq = entries.at[i].value;
    }
    Py_buffer body_buf;
    if (uniq.p == NULL || props_len > MAX_PROPERTIES_LENGTH)
        Py_RETURN_NONE;
    if (PyObject_GetBuffer(args[2], &body_buf, PyBUF_SIMPLE) < 0)
        return NULL;
    Span body = {body_buf.buf, body_buf.len};
    Py_ssize_t size = encoded_size(topic, born_host, store_host, body, props_len);
    PyObject *record = NULL, *uniq_text = NULL, *result = NULL;
    if (body.n > max_body || size > max_record) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    java_order(&entries, (uint32_t)capacity);
    Span parts[4 * MAX_ENTRIES];
    for (int i = 0; i < entries.count; i++) {
        parts[4 * i] = entries.at[i].name;
        parts[4 * i + 1] = (Span){&NAME_VALUE_SEPARATOR, 1};
        parts[4 * i + 2] = entries.at[i].value;
        parts[4 * i + 3] = (Span){&PROPERTY_SEPARATOR, 1};
    }
    record = PyByteArray_FromStringAndSize(NULL, size);
    uniq_text = PyUnicode_DecodeUTF8((const char *)uniq.p, uniq.n, NULL);
    if (record == NULL || uniq_text == NULL)
        goto done;
    uint32_t crc = rmq_crc32(0, body.p, (size_t)body.n) & 0x7FFFFFFFu;
    write_encoded((uint8_t *)PyByteArray_AS_STRING(record), size, topic, (int32_t)queue_id, (int32_t)flag, crc,
                  stored_sys_flag((int32_t)(sys_flag | sys_flag_bits), born_host, store_host), born_timestamp,
                  born_host, store_host, (int32_t)reconsume_times, body, parts, 4 * entries.count);
    result = Py_BuildValue("(OLO)", record, queue_id, uniq_text);
done:
    Py_XDECREF(record);
    Py_XDECREF(uniq_text);
    PyBuffer_Release(&body_buf);
    return result;
}

PyMethodDef rmq_send_methods[] = {
    {"send_record", (PyCFunction)(void (*)(void))send_record, METH_FASTCALL, send_record_doc},
    {NULL, NULL, 0, NULL},
};
