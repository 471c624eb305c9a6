/*
 * broker._speedups, pull part: the records of a PULL_MESSAGE body as the buffers of Arrow columns, in one C pass.
 * Built into the same module as broker/_speedups.c (which adds this function to it); its Python twin is
 * connector/records.py's _decode_records_py (numpy and Arrow kernels), and tests/unit/test_records.py holds the two
 * to the same RecordBatches.
 *
 * - pull_columns(body, end_offset): the records below end_offset as the buffers connector/records.py wraps into a
 *   RecordBatch without copying; None for what the twin must decode (a host in IPv6, a compressed body, an unknown
 *   magic code, a record that does not fit, PROPERTIES that are not UTF-8: the twin then decodes or names the fault).
 *
 * The twin costs about 2.5 us a 1 KB row on a quiet machine (a Python step per record, then some 60 numpy and Arrow
 * calls a batch, each over every row); this one pass costs a fraction of that, most of it the copy of the bodies.
 * The record layout is broker/common/record.py's, in _speedups.h; tests/unit/test_record_layout.py holds it and the
 * numbers below to it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "_speedups.h"

#define HOST_TEXT_MAX 28              /* "255.255.255.255:-2147483648" and a NUL */
#define OFFSET_MSG_ID_LENGTH 32       /* hex of the store host (8 bytes) and of the commit log offset (8 bytes) */

/* One output buffer: a bytes object filled in place, cut to what was written when done. */
typedef struct {
    PyObject *bytes;
    uint8_t *at;
} Out;

static int out_new(Out *out, Py_ssize_t capacity) {
    out->bytes = PyBytes_FromStringAndSize(NULL, capacity);
    out->at = out->bytes ? (uint8_t *)PyBytes_AS_STRING(out->bytes) : NULL;
    return out->bytes ? 0 : -1;
}

static int out_finish(Out *out) {
    return _PyBytes_Resize(&out->bytes, out->at - (uint8_t *)PyBytes_AS_STRING(out->bytes));
}

/* A string or binary column: int32 offsets (n + 1), the values, and a validity bitmap when it can hold nulls. */
typedef struct {
    Out offsets, data, valid;
    int32_t *offset;
    Py_ssize_t nulls;
} Column;

static int column_new(Column *c, Py_ssize_t n, Py_ssize_t data_capacity, int nullable) {
    c->nulls = 0;
    c->valid.bytes = NULL;
    if (out_new(&c->offsets, 4 * (n + 1)) < 0 || out_new(&c->data, data_capacity) < 0)
        return -1;
    if (nullable) {
        if (out_new(&c->valid, (n + 7) / 8) < 0)
            return -1;
        memset(c->valid.at, 0, (size_t)(n + 7) / 8);
    }
    c->offset = (int32_t *)c->offsets.at;
    *c->offset = 0;
    return 0;
}

static inline void column_put(Column *c, Py_ssize_t row, const uint8_t *p, Py_ssize_t n) {
    memcpy(c->data.at, p, (size_t)n);
    c->data.at += n;
    c->offset[row + 1] = c->offset[row] + (int32_t)n;
    if (c->valid.bytes)
        c->valid.at[row >> 3] |= (uint8_t)(1u << (row & 7));
}

static inline void column_null(Column *c, Py_ssize_t row) {
    c->offset[row + 1] = c->offset[row];
    c->nulls++;
}

/* offsets, data, validity (None when it has no nulls), null count; the column's references pass to the tuple. */
static PyObject *column_tuple(Column *c, Py_ssize_t n) {
    c->offsets.at += 4 * (n + 1);
    if (out_finish(&c->offsets) < 0 || out_finish(&c->data) < 0)
        return NULL;
    PyObject *valid = c->valid.bytes && c->nulls ? c->valid.bytes : Py_None;
    PyObject *result = Py_BuildValue("(OOOn)", c->offsets.bytes, c->data.bytes, valid, c->nulls);
    Py_CLEAR(c->offsets.bytes);
    Py_CLEAR(c->data.bytes);
    Py_CLEAR(c->valid.bytes);
    return result;
}

static void column_clear(Column *c) {
    Py_CLEAR(c->offsets.bytes);
    Py_CLEAR(c->data.bytes);
    Py_CLEAR(c->valid.bytes);
}

/* "ip:port" of an IPv4 host field, remembered while the same host repeats (a pull holds few). */
typedef struct {
    uint8_t packed[HOST_V4_LENGTH];
    char text[HOST_TEXT_MAX];
    int length;
} HostText;

static inline void host_put(Column *c, Py_ssize_t row, HostText *last, const uint8_t *packed) {
    if (last->length == 0 || memcmp(last->packed, packed, HOST_V4_LENGTH) != 0) {
        memcpy(last->packed, packed, HOST_V4_LENGTH);
        last->length = snprintf(last->text, HOST_TEXT_MAX, "%u.%u.%u.%u:%d", packed[0], packed[1], packed[2],
                                packed[3], (int)(int32_t)get32(packed + 4));
    }
    column_put(c, row, (const uint8_t *)last->text, last->length);
}

static const char HEX[] = "0123456789ABCDEF";

static inline void hex_put(uint8_t *out, uint64_t v) {
    for (int i = 15; i >= 0; i--, v >>= 4)
        out[i] = (uint8_t)HEX[v & 0xF];
}

/* Where a record's parts are, found by the first pass and kept for the second. */
typedef struct {
    Py_ssize_t body_length, properties_at, properties_length;
} Parts;

/* The record at ``r`` (``room`` bytes left in the body) for the bulk path: its parts, or -1 when the twin must
 * decode it. */
static int record_parts(const uint8_t *r, Py_ssize_t room, Parts *parts) {
    int64_t size = (int32_t)get32(r);
    if (size < FIXED_SIZE_V4 || size > room)
        return -1;
    uint32_t magic = get32(r + MAGICCODE_POS), sys_flag = get32(r + SYSFLAG_POS);
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || (sys_flag & (COMPRESSED | BORNHOST_V6 | STOREHOST_V6)))
        return -1;
    int64_t body_length = (int32_t)get32(r + BODY_LENGTH_POS_V4);
    int64_t topic_at = FIXED_SIZE_V4 + body_length, topic_size = magic == MAGIC_V1 ? 1 : 2;
    if (body_length < 0 || topic_at + topic_size > size)
        return -1;
    int64_t topic_length = magic == MAGIC_V1 ? r[topic_at] : (int64_t)r[topic_at] << 8 | r[topic_at + 1];
    int64_t properties_at = topic_at + topic_size + topic_length;
    if (properties_at + 2 > size)
        return -1;
    int64_t properties_length = (int64_t)r[properties_at] << 8 | r[properties_at + 1];
    if (properties_at + 2 + properties_length > size || !rmq_is_utf8(r + properties_at + 2, properties_length))
        return -1;
    parts->body_length = body_length;
    parts->properties_at = properties_at + 2;
    parts->properties_length = properties_length;
    return 0;
}

/* The entries of one record's PROPERTIES (name \x01 value \x02 ..., kept when name and value are both non-empty,
 * MessageDecoder.string2messageProperties' rule) into the map's key and value columns; the last value of TAGS, KEYS
 * and UNIQ_KEY is noted. Returns the number of entries kept. */
static Py_ssize_t put_entries(const uint8_t *p, Py_ssize_t n, Column *keys, Column *values, Py_ssize_t entry,
                              Span *tags, Span *msg_keys, Span *uniq_key) {
    PropertyWalk walk = property_walk(p, n);
    Span name, value;
    Py_ssize_t kept = 0;
    while (next_property(&walk, &name, &value)) {
        column_put(keys, entry + kept, name.p, name.n);
        column_put(values, entry + kept, value.p, value.n);
        kept++;
        if (span_equals(name, "TAGS"))
            *tags = value;
        else if (span_equals(name, "KEYS"))
            *msg_keys = value;
        else if (span_equals(name, "UNIQ_KEY"))
            *uniq_key = value;
    }
    return kept;
}

PyDoc_STRVAR(pull_columns_doc,
"pull_columns(body, end_offset) -> tuple | None\n\n"
"The records of a pull body before the first whose queue offset is end_offset or more, as Arrow buffers:\n"
"(n, queueId int32, queueOffset int64, sysFlag int32, bornTimestamp int64 us, storeTimestamp int64 us,\n"
"reconsumeTimes int32, msgId, offsetMsgId, keys, tags, body, bornHost, storeHost, properties map offsets int32,\n"
"property names, property values); each string or binary column as (offsets, data, validity or None, null count).\n"
"None when a record needs the Python decoder (IPv6 host, compressed body, malformed, PROPERTIES not UTF-8).");

#define FIXED_COLUMNS 6

static PyObject *pull_columns(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer buf;
    long long end_offset;
    if (!PyArg_ParseTuple(args, "y*L:pull_columns", &buf, &end_offset))
        return NULL;
    const uint8_t *base = buf.buf;
    Py_ssize_t end = buf.len, pos = 0, n = 0, body_bytes = 0, properties_bytes = 0, entries = 0;
    PyObject *result = NULL;
    Out fixed[FIXED_COLUMNS] = {{0}}, map_offsets = {0};
    Parts *parts = NULL;
    enum { MSG_ID, OFFSET_MSG_ID, KEYS, TAGS, BODY, BORN_HOST, STORE_HOST, NAMES, VALUES, COLUMNS };
    Column columns[COLUMNS];
    memset(columns, 0, sizeof(columns));
    /* first pass: how many records, where their parts are, and how many bytes their columns take */
    parts = PyMem_Malloc(sizeof(Parts) * (size_t)(end / FIXED_SIZE_V4 + 1));
    if (parts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int beyond = 0;  /* a record at end_offset was met: the rest are walked (a damaged one goes to the twin), not kept */
    while (pos < end) {
        if (record_parts(base + pos, end - pos, &parts[n]) < 0)
            goto twin;
        if (!beyond && (long long)get64(base + pos + QUEUEOFFSET_POS) >= end_offset)
            beyond = 1;
        if (!beyond) {
            body_bytes += parts[n].body_length;
            properties_bytes += parts[n].properties_length;
            entries += parts[n].properties_length / 3 + 1;  /* an entry kept takes 3 bytes at least: a, \x01, b */
            n++;
        }
        pos += (int32_t)get32(base + pos);
    }
    if (body_bytes > INT32_MAX || properties_bytes + n * OFFSET_MSG_ID_LENGTH > INT32_MAX)
        goto twin;  /* over int32 offsets: not a pull body */
    static const int widths[FIXED_COLUMNS] = {4, 8, 4, 8, 8, 4};
    for (int i = 0; i < FIXED_COLUMNS; i++)
        if (out_new(&fixed[i], widths[i] * n) < 0)
            goto done;
    if (out_new(&map_offsets, 4 * (n + 1)) < 0
        || column_new(&columns[MSG_ID], n, properties_bytes + n * OFFSET_MSG_ID_LENGTH, 0) < 0
        || column_new(&columns[OFFSET_MSG_ID], n, n * OFFSET_MSG_ID_LENGTH, 0) < 0
        || column_new(&columns[KEYS], n, properties_bytes, 1) < 0
        || column_new(&columns[TAGS], n, properties_bytes, 1) < 0
        || column_new(&columns[BODY], n, body_bytes, 0) < 0
        || column_new(&columns[BORN_HOST], n, n * HOST_TEXT_MAX, 0) < 0
        || column_new(&columns[STORE_HOST], n, n * HOST_TEXT_MAX, 0) < 0
        || column_new(&columns[NAMES], entries, properties_bytes, 0) < 0
        || column_new(&columns[VALUES], entries, properties_bytes, 0) < 0)
        goto done;
    /* second pass: fill them */
    int32_t *queue_id = (int32_t *)fixed[0].at, *sys_flag = (int32_t *)fixed[2].at, *reconsume = (int32_t *)fixed[5].at;
    int64_t *queue_offset = (int64_t *)fixed[1].at, *born = (int64_t *)fixed[3].at, *store = (int64_t *)fixed[4].at;
    int32_t *map_offset = (int32_t *)map_offsets.at;
    HostText born_text = {.length = 0}, store_text = {.length = 0};
    uint8_t offset_msg_id[OFFSET_MSG_ID_LENGTH];
    Py_ssize_t entry = 0;
    map_offset[0] = 0;
    pos = 0;
    for (Py_ssize_t row = 0; row < n; row++) {
        const uint8_t *r = base + pos;
        queue_id[row] = (int32_t)get32(r + QUEUEID_POS);
        queue_offset[row] = (int64_t)get64(r + QUEUEOFFSET_POS);
        sys_flag[row] = (int32_t)get32(r + SYSFLAG_POS);
        born[row] = (int64_t)get64(r + BORNTIMESTAMP_POS) * 1000;
        store[row] = (int64_t)get64(r + STORETIMESTAMP_POS_V4) * 1000;
        reconsume[row] = (int32_t)get32(r + RECONSUMETIMES_POS_V4);
        hex_put(offset_msg_id, get64(r + STOREHOST_POS_V4));
        hex_put(offset_msg_id + 16, get64(r + PHYSICALOFFSET_POS));
        column_put(&columns[OFFSET_MSG_ID], row, offset_msg_id, OFFSET_MSG_ID_LENGTH);
        Span tags = {NULL, 0}, msg_keys = {NULL, 0}, uniq_key = {NULL, 0};
        entry += put_entries(r + parts[row].properties_at, parts[row].properties_length, &columns[NAMES],
                             &columns[VALUES], entry, &tags, &msg_keys, &uniq_key);
        map_offset[row + 1] = (int32_t)entry;
        if (uniq_key.p)
            column_put(&columns[MSG_ID], row, uniq_key.p, uniq_key.n);
        else
            column_put(&columns[MSG_ID], row, offset_msg_id, OFFSET_MSG_ID_LENGTH);
        if (msg_keys.p)
            column_put(&columns[KEYS], row, msg_keys.p, msg_keys.n);
        else
            column_null(&columns[KEYS], row);
        if (tags.p)
            column_put(&columns[TAGS], row, tags.p, tags.n);
        else
            column_null(&columns[TAGS], row);
        column_put(&columns[BODY], row, r + FIXED_SIZE_V4, parts[row].body_length);
        host_put(&columns[BORN_HOST], row, &born_text, r + BORNHOST_POS);
        host_put(&columns[STORE_HOST], row, &store_text, r + STOREHOST_POS_V4);
        pos += (int32_t)get32(r);
    }
    for (int i = 0; i < FIXED_COLUMNS; i++)
        fixed[i].at += widths[i] * n;
    map_offsets.at += 4 * (n + 1);
    PyObject *items[COLUMNS];
    int made = 0;
    for (; made < COLUMNS; made++)
        if ((items[made] = column_tuple(&columns[made], made >= NAMES ? entry : n)) == NULL)
            break;
    if (made == COLUMNS && out_finish(&map_offsets) == 0)
        result = Py_BuildValue("(nOOOOOOOOOOOOOOOO)", n, fixed[0].bytes, fixed[1].bytes, fixed[2].bytes,
                               fixed[3].bytes, fixed[4].bytes, fixed[5].bytes, items[MSG_ID], items[OFFSET_MSG_ID],
                               items[KEYS], items[TAGS], items[BODY], items[BORN_HOST], items[STORE_HOST],
                               map_offsets.bytes, items[NAMES], items[VALUES]);
    for (int i = 0; i < made; i++)
        Py_DECREF(items[i]);
    goto done;
twin:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(parts);
    for (int i = 0; i < FIXED_COLUMNS; i++)
        Py_XDECREF(fixed[i].bytes);
    Py_XDECREF(map_offsets.bytes);
    for (int i = 0; i < COLUMNS; i++)
        column_clear(&columns[i]);
    PyBuffer_Release(&buf);
    return result;
}

PyMethodDef rmq_pull_methods[] = {
    {"pull_columns", pull_columns, METH_VARARGS, pull_columns_doc},
    {NULL, NULL, 0, NULL},
};
