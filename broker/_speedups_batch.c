/*
 * broker._speedups, batch part: the SEND_BATCH_MESSAGE body (broker/common/message_batch.py's layout), read in one
 * pass. Built into the same module as broker/_speedups.c (which adds this function to it); its Python twin is
 * message_batch._decode_batch_items_py, and tests/unit/test_speedups.py holds the pair to the same output.
 *
 * - decode_batch_items: each message's (body, properties dict, flag, PROPERTIES bytes), or None when anything in the
 *   body is malformed (message_batch.py then walks it again in Python to raise CorruptRecord with the same message).
 * - decode_end_batch_handles: the handles of an END_TRANSACTION_BATCH body (broker/remoting/transaction_batch.py's
 *   layout), or None when it is malformed (its Python twin then names the fault). About 2 us a handle in Python.
 * - offset_msg_ids_text: a batch's offsetMsgIds, comma-joined, for its send response (message.py's twin).
 * - batch_records: each message of a plain batch body as its whole CommitLog record, encoded ahead of the put
 *   (broker/store/commit_log.py's encode_batch_ahead, whose Python twin is _encode_batch_ahead_py), or None when the
 *   body is malformed or a limit is passed (the general path then names what is wrong).
 *
 * In Python a 16-message batch cost about 3 us a message (struct unpacks, slices, a decode and a split per message),
 * the largest share of a batched send after the socket write.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_speedups.h"

#define ITEM_HEAD_SIZE 20   /* TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODY length: 4 bytes each */
#define FLAG_POS 12
#define BODY_LENGTH_POS 16
#define PROPERTIES_LENGTH_SIZE 2

static inline int32_t get_s32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

typedef struct {
    Span body, props;
    int32_t flag;
} BatchItem;

/* The item of a batch body at *pos (message_batch.py's layout), *pos moved past it: 0 when what is there is not a
 * whole item (sizes out of the body, a negative length, TOTALSIZE not the item's). Every walk of a batch body in
 * this file goes through here, so they agree on what is malformed. */
static inline int next_batch_item(const uint8_t *base, Py_ssize_t end, Py_ssize_t *pos, BatchItem *item) {
    const uint8_t *b = base + *pos;
    if (end - *pos < ITEM_HEAD_SIZE)
        return 0;
    int32_t size = get_s32(b), body_len = get_s32(b + BODY_LENGTH_POS);
    Py_ssize_t cur = *pos + ITEM_HEAD_SIZE;
    if (body_len < 0 || body_len > end - cur || end - cur - body_len < PROPERTIES_LENGTH_SIZE)
        return 0;
    item->body = (Span){base + cur, body_len};
    cur += body_len;
    int16_t props_len = (int16_t)(base[cur] << 8 | base[cur + 1]);
    cur += PROPERTIES_LENGTH_SIZE;
    if (props_len < 0 || props_len > end - cur || cur + props_len - *pos != size)
        return 0;
    item->props = (Span){base + cur, props_len};
    item->flag = get_s32(b + FLAG_POS);
    *pos = cur + props_len;
    return 1;
}

PyDoc_STRVAR(decode_batch_items_doc,
"decode_batch_items(body) -> [(body, properties, flag, encoded_properties), ...] | None\n\n"
"The messages of a SEND_BATCH_MESSAGE body, each as its body bytes, its properties as a dict (entries with an\n"
"empty name or value left out), its FLAG and its PROPERTIES field's bytes; None when the body is malformed.");

static PyObject *decode_batch_items(PyObject *Py_UNUSED(module), PyObject *arg) {
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *base = buf.buf;
    Py_ssize_t pos = 0, end = buf.len;
    NameCache names = {.count = 0};
    PyObject *items = PyList_New(0), *result = NULL;
    BatchItem it;
    while (items != NULL && pos < end) {
        if (!next_batch_item(base, end, &pos, &it) || !rmq_is_utf8(it.props.p, it.props.n))
            goto malformed;
        PyObject *properties = rmq_decode_properties(it.props.p, it.props.n, &names);
        if (properties == NULL)
            goto done;
        PyObject *item = Py_BuildValue("(y#Niy#)", (const char *)it.body.p, it.body.n, properties, (int)it.flag,
                                       (const char *)it.props.p, it.props.n);
        if (item == NULL || PyList_Append(items, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
    }
    result = items;
    items = NULL;
    goto done;
malformed:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(items);
    for (int i = 0; i < names.count; i++)
        Py_DECREF(names.names[i]);
    PyBuffer_Release(&buf);
    return result;
}

#define HANDLE_HEAD_SIZE 18  /* commitLogOffset 8, tranStateTableOffset 8, msgId length 2 */

static inline int64_t get_s64(const uint8_t *p) {
    return (int64_t)((uint64_t)(uint32_t)get_s32(p) << 32 | (uint32_t)get_s32(p + 4));
}

PyDoc_STRVAR(decode_end_batch_handles_doc,
"decode_end_batch_handles(body, max_count) -> [(commit_log_offset, queue_offset, msg_id), ...] | None\n\n"
"The handles of an END_TRANSACTION_BATCH body; None when the count is not 1..max_count, a handle is cut short, a\n"
"msgId is not UTF-8, or bytes are left over.");

static PyObject *decode_end_batch_handles(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer buf;
    int max_count;
    if (!PyArg_ParseTuple(args, "y*i", &buf, &max_count))
        return NULL;
    const uint8_t *base = buf.buf;
    Py_ssize_t end = buf.len, pos = 4;
    PyObject *handles = NULL, *result = NULL;
    int32_t count = end >= 4 ? get_s32(base) : 0;
    if (count <= 0 || count > max_count)
        goto malformed;
    handles = PyList_New(count);
    if (handles == NULL)
        goto done;
    for (int32_t i = 0; i < count; i++) {
        if (end - pos < HANDLE_HEAD_SIZE)
            goto malformed;
        const uint8_t *h = base + pos;
        int16_t length = (int16_t)(h[16] << 8 | h[17]);
        pos += HANDLE_HEAD_SIZE;
        if (length < 0 || length > end - pos)
            goto malformed;
        PyObject *msg_id = PyUnicode_DecodeUTF8((const char *)base + pos, length, NULL);
        if (msg_id == NULL) {
            PyErr_Clear();
            goto malformed;
        }
        PyObject *handle = Py_BuildValue("(LLN)", (long long)get_s64(h), (long long)get_s64(h + 8), msg_id);
        if (handle == NULL)
            goto done;
        PyList_SET_ITEM(handles, i, handle);
        pos += length;
    }
    if (pos != end)
        goto malformed;
    result = handles;
    handles = NULL;
    goto done;
malformed:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(handles);
    PyBuffer_Release(&buf);
    return result;
}

/* -- prepared batches: half and committed records encoded ahead ------------------------------------------------------
 * transaction/batch.py's half_batch_records: each item of a prepared batch becomes its half record (stored now) and
 * its committed record (stored by END_TRANSACTION_BATCH), both whole CommitLog records but for the fields only their
 * put knows (queue offset, physical offset, store timestamp; the committed record's prepared transaction offset once
 * the half is stored). Only the common shape is done here; anything else (see half_batch_fast) answers None and the
 * batch takes the general path, which also names what is wrong. In Python a row cost about 8 us this way. */

/* The property names this path reads, and those that send an item to the general path: the broker sets them
 * (transaction/batch.py's ``reserved``), or they change what the half message is (DELAY, TRANSACTION_CHECK_TIMES). */
enum { P_TRAN_MSG, P_PGROUP, P_UNIQ_KEY, P_IMMUNITY, P_COUNT };
static const char *const READ_NAMES[P_COUNT] = {"TRAN_MSG", "PGROUP", "UNIQ_KEY", "CHECK_IMMUNITY_TIME_IN_SECONDS"};
static const char *const GENERAL_NAMES[] = {"DELAY", "TRANSACTION_CHECK_TIMES", "REAL_TOPIC", "REAL_QID",
                                            "__transactionId__", "POP_CK", "MSG_REGION", "TRACE_ON", "CLUSTER"};

/* Reads the entries of an item's PROPERTIES into ``found`` (P_*); 0 when the item is not of the common shape: an
 * entry without a name, value or separator, not ending in \x02, a name read twice, or a name of GENERAL_NAMES. */
static int half_batch_fast(Span props, Span found[P_COUNT]) {
    const uint8_t *p = props.p, *end = props.p + props.n;
    if (props.n == 0 || end[-1] != 0x02)
        return 0;
    while (p < end) {
        const uint8_t *entry_end = memchr(p, 0x02, (size_t)(end - p));
        const uint8_t *sep = memchr(p, 0x01, (size_t)(entry_end - p));
        if (sep == NULL || sep == p || sep + 1 == entry_end)
            return 0;
        Span name = {p, sep - p}, value = {sep + 1, entry_end - sep - 1};
        for (int i = 0; i < P_COUNT; i++) {
            if (span_equals(name, READ_NAMES[i])) {
                if (found[i].p != NULL)
                    return 0;
                found[i] = value;
            }
        }
        for (size_t i = 0; i < sizeof(GENERAL_NAMES) / sizeof(GENERAL_NAMES[0]); i++) {
            if (span_equals(name, GENERAL_NAMES[i]))
                return 0;
        }
        p = entry_end + 1;
    }
    return 1;
}

static int is_true(Span s) {
    static const char TRUE_TEXT[] = "true";
    if (s.n != 4)
        return 0;
    for (int i = 0; i < 4; i++) {
        uint8_t c = s.p[i];
        if ((c >= 'A' && c <= 'Z' ? c + 32 : c) != TRUE_TEXT[i])
            return 0;
    }
    return 1;
}

/* A str of the value, reusing ``*last`` when it holds the same text (the sink gives every row one immunity). */
static PyObject *value_str(Span value, PyObject **last) {
    if (*last != NULL && PyUnicode_GET_LENGTH(*last) == value.n && PyUnicode_IS_ASCII(*last) &&
        memcmp(PyUnicode_DATA(*last), value.p, (size_t)value.n) == 0)
        return Py_NewRef(*last);
    PyObject *text = PyUnicode_DecodeUTF8((const char *)value.p, value.n, NULL);
    if (text != NULL) {
        Py_XSETREF(*last, Py_NewRef(text));
    }
    return text;
}

PyDoc_STRVAR(half_batch_records_doc,
"half_batch_records(body, producer_group, topic, queue_id, half_topic, half_queue_id, sys_flag, born_timestamp,\n"
"                   born_host, reconsume_times, store_host, added, real, transaction_id_name, max_body,\n"
"                   max_record) -> (halves, commits, transaction_ids, immunities) | None\n\n"
"The half record (bytes) and committed record (bytearray) of each item of a prepared batch body, encoded ahead,\n"
"with each item's UNIQ_KEY and CHECK_IMMUNITY_TIME_IN_SECONDS (or None); None when an item is not of the common\n"
"shape (transaction/batch.py's _half_batch_records_py says which), the body is malformed, or a limit is passed.");

static PyObject *half_batch_records(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer buf;
    Span group, topic, half_topic, born_host, store_host, added, real, tx_name;
    int queue_id, half_queue_id, sys_flag, reconsume_times;
    long long born_timestamp;
    Py_ssize_t max_body, max_record;
    if (!PyArg_ParseTuple(args, "y*y#y#iy#iiLy#iy#y#y#y#nn:half_batch_records", &buf, &group.p, &group.n, &topic.p,
                          &topic.n, &queue_id, &half_topic.p, &half_topic.n, &half_queue_id, &sys_flag,
                          &born_timestamp, &born_host.p, &born_host.n, &reconsume_times, &store_host.p, &store_host.n,
                          &added.p, &added.n, &real.p, &real.n, &tx_name.p, &tx_name.n, &max_body, &max_record))
        return NULL;
    PyObject *halves = PyList_New(0), *commits = PyList_New(0), *ids = PyList_New(0), *immunities = PyList_New(0);
    PyObject *seen = PySet_New(NULL), *last_immunity = NULL, *result = NULL;
    const uint8_t *base = buf.buf;
    Py_ssize_t pos = 0, end = buf.len;
    if (halves == NULL || commits == NULL || ids == NULL || immunities == NULL || seen == NULL)
        goto done;
    if ((born_host.n != HOST_V4_LENGTH && born_host.n != HOST_V6_LENGTH) ||
        (store_host.n != HOST_V4_LENGTH && store_host.n != HOST_V6_LENGTH) || topic.n > TOPIC_V2_MAX ||
        half_topic.n > TOPIC_V2_MAX)
        goto general;
    int32_t half_flag = stored_sys_flag((sys_flag & ~TX_MASK), born_host, store_host);
    int32_t commit_flag = stored_sys_flag((sys_flag & ~TX_MASK) | TX_COMMIT, born_host, store_host);
    static const uint8_t SEPARATOR = 0x02;
    BatchItem it;
    while (pos < end) {
        if (!next_batch_item(base, end, &pos, &it) || it.body.n > max_body)
            goto general;
        Span body = it.body, props = it.props, found[P_COUNT] = {{0}};
        int32_t flag = it.flag;
        if (!rmq_is_utf8(props.p, props.n) || !half_batch_fast(props, found) ||
            found[P_UNIQ_KEY].p == NULL || found[P_TRAN_MSG].p == NULL || !is_true(found[P_TRAN_MSG]) ||
            found[P_PGROUP].p == NULL || found[P_PGROUP].n != group.n ||
            memcmp(found[P_PGROUP].p, group.p, (size_t)group.n) != 0)
            goto general;
        Span uniq = found[P_UNIQ_KEY];
        Span commit_props[] = {props, added, tx_name, uniq, {&SEPARATOR, 1}}, half_props[6];
        memcpy(half_props, commit_props, sizeof(commit_props));
        half_props[5] = real;
        Py_ssize_t commit_props_len = props.n + added.n + tx_name.n + uniq.n + 1;
        Py_ssize_t half_size = encoded_size(half_topic, born_host, store_host, body, commit_props_len + real.n);
        Py_ssize_t commit_size = encoded_size(topic, born_host, store_host, body, commit_props_len);
        if (commit_props_len + real.n > MAX_PROPERTIES_LENGTH || half_size > max_record || commit_size > max_record)
            goto general;
        PyObject *id = PyUnicode_DecodeUTF8((const char *)uniq.p, uniq.n, NULL);
        if (id == NULL)
            goto done;
        int repeated = PySet_Contains(seen, id);
        if (repeated != 0 || PySet_Add(seen, id) < 0 || PyList_Append(ids, id) < 0) {
            Py_DECREF(id);
            if (repeated == 1)
                goto general;
            goto done;
        }
        Py_DECREF(id);
        PyObject *immunity = found[P_IMMUNITY].p == NULL ? Py_NewRef(Py_None)
                                                          : value_str(found[P_IMMUNITY], &last_immunity);
        if (immunity == NULL || PyList_Append(immunities, immunity) < 0) {
            Py_XDECREF(immunity);
            goto done;
        }
        Py_DECREF(immunity);
        uint32_t crc = rmq_crc32(0, body.p, (size_t)body.n) & 0x7FFFFFFFu;
        PyObject *half = PyBytes_FromStringAndSize(NULL, half_size);
        if (half == NULL || PyList_Append(halves, half) < 0) {
            Py_XDECREF(half);
            goto done;
        }
        write_encoded((uint8_t *)PyBytes_AS_STRING(half), half_size, half_topic, half_queue_id, flag, crc, half_flag,
                      born_timestamp, born_host, store_host, reconsume_times, body, half_props, 6);
        Py_DECREF(half);
        PyObject *commit = PyByteArray_FromStringAndSize(NULL, commit_size);
        if (commit == NULL || PyList_Append(commits, commit) < 0) {
            Py_XDECREF(commit);
            goto done;
        }
        write_encoded((uint8_t *)PyByteArray_AS_STRING(commit), commit_size, topic, queue_id, flag, crc, commit_flag,
                      born_timestamp, born_host, store_host, reconsume_times, body, commit_props, 5);
        Py_DECREF(commit);
    }
    if (PyList_GET_SIZE(halves) == 0)
        goto general;
    result = PyTuple_Pack(4, halves, commits, ids, immunities);
    goto done;
general:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(halves);
    Py_XDECREF(commits);
    Py_XDECREF(ids);
    Py_XDECREF(immunities);
    Py_XDECREF(seen);
    Py_XDECREF(last_immunity);
    PyBuffer_Release(&buf);
    return result;
}

/* -- plain batches: records encoded ahead ---------------------------------------------------------------------------
 * A plain SEND_BATCH_MESSAGE stores each item as the record the put would pack from its StoreMessage (the item's
 * body, FLAG and PROPERTIES bytes as the producer wrote them; the rest from the request header). Built here in one
 * pass, the put takes them whole: no properties dict, StoreMessage or attribute reads per message (about a
 * microsecond a message of the broker's main thread, at any body size). */

PyDoc_STRVAR(batch_records_doc,
"batch_records(body, topic, queue_id, sys_flag, born_timestamp, born_host, reconsume_times, store_host, max_body,\n"
"              max_record) -> [bytearray, ...] | None\n\n"
"The record of each message of a plain batch body, encoded ahead (queue offset, physical offset and store timestamp\n"
"zero); None when the body is malformed or empty, a properties field is not UTF-8, or a limit is passed.");

static PyObject *batch_records(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer buf;
    Span topic, born_host, store_host;
    int queue_id, sys_flag, reconsume_times;
    long long born_timestamp;
    Py_ssize_t max_body, max_record;
    if (!PyArg_ParseTuple(args, "y*y#iiLy#iy#nn:batch_records", &buf, &topic.p, &topic.n, &queue_id, &sys_flag,
                          &born_timestamp, &born_host.p, &born_host.n, &reconsume_times, &store_host.p, &store_host.n,
                          &max_body, &max_record))
        return NULL;
    PyObject *records = PyList_New(0), *result = NULL;
    const uint8_t *base = buf.buf;
    Py_ssize_t pos = 0, end = buf.len;
    if (records == NULL)
        goto done;
    if ((born_host.n != HOST_V4_LENGTH && born_host.n != HOST_V6_LENGTH) ||
        (store_host.n != HOST_V4_LENGTH && store_host.n != HOST_V6_LENGTH) || topic.n > TOPIC_V2_MAX || end == 0)
        goto general;
    int32_t stored_flag = stored_sys_flag(sys_flag, born_host, store_host);
    BatchItem it;
    while (pos < end) {
        if (!next_batch_item(base, end, &pos, &it) || it.body.n > max_body)
            goto general;
        Span body = it.body, props = it.props;
        int32_t flag = it.flag;
        Py_ssize_t record_size = encoded_size(topic, born_host, store_host, body, props.n);
        if (!rmq_is_utf8(props.p, props.n) || record_size > max_record)
            goto general;
        PyObject *record = PyByteArray_FromStringAndSize(NULL, record_size);
        if (record == NULL || PyList_Append(records, record) < 0) {
            Py_XDECREF(record);
            goto done;
        }
        uint32_t crc = rmq_crc32(0, body.p, (size_t)body.n) & 0x7FFFFFFFu;
        write_encoded((uint8_t *)PyByteArray_AS_STRING(record), record_size, topic, queue_id, flag, crc, stored_flag,
                      born_timestamp, born_host, store_host, reconsume_times, body, &props, 1);
        Py_DECREF(record);
    }
    result = Py_NewRef(records);
    goto done;
general:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(records);
    PyBuffer_Release(&buf);
    return result;
}

PyDoc_STRVAR(offset_msg_ids_text_doc,
"offset_msg_ids_text(store_host, physical_offsets) -> str\n\n"
"The offsetMsgId of each offset (upper-case hex of the packed store host and the offset), comma-joined.");

static PyObject *offset_msg_ids_text(PyObject *Py_UNUSED(module), PyObject *args) {
    static const char HEX[] = "0123456789ABCDEF";
    Span host;
    PyObject *offsets;
    if (!PyArg_ParseTuple(args, "y#O:offset_msg_ids_text", &host.p, &host.n, &offsets))
        return NULL;
    PyObject *seq = PySequence_Fast(offsets, "physical_offsets must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), id_len = 2 * (host.n + 8);
    PyObject *text = PyUnicode_New(n ? n * (id_len + 1) - 1 : 0, 127);
    if (text == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(text);
    for (Py_ssize_t i = 0; i < n; i++) {
        long long offset = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (offset == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            Py_DECREF(text);
            return NULL;
        }
        if (i)
            *out++ = ',';
        for (Py_ssize_t j = 0; j < host.n; j++) {
            *out++ = HEX[host.p[j] >> 4];
            *out++ = HEX[host.p[j] & 15];
        }
        for (int shift = 60; shift >= 0; shift -= 4)
            *out++ = HEX[((uint64_t)offset >> shift) & 15];
    }
    Py_DECREF(seq);
    return text;
}

PyDoc_STRVAR(set_prepared_offsets_doc,
"set_prepared_offsets(records, offsets) -> None\n\n"
"Write offsets[i] into the PREPAREDTRANSACTIONOFFSET of records[i] (bytearrays of half_batch_records).");

static PyObject *set_prepared_offsets(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *records, *offsets;
    if (!PyArg_ParseTuple(args, "O!O!:set_prepared_offsets", &PyList_Type, &records, &PyList_Type, &offsets))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(records);
    if (PyList_GET_SIZE(offsets) != n) {
        PyErr_SetString(PyExc_ValueError, "records and offsets differ in length");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *record = PyList_GET_ITEM(records, i);
        long long offset = PyLong_AsLongLong(PyList_GET_ITEM(offsets, i));
        if (offset == -1 && PyErr_Occurred())
            return NULL;
        if (!PyByteArray_Check(record) || PyByteArray_GET_SIZE(record) < FIXED_SIZE_V4) {
            PyErr_SetString(PyExc_TypeError, "a record encoded ahead must be a bytearray of a whole record");
            return NULL;
        }
        uint8_t *r = (uint8_t *)PyByteArray_AS_STRING(record);
        uint32_t flags = get32(r + SYSFLAG_POS);
        Py_ssize_t born = flags & BORNHOST_V6 ? HOST_V6_LENGTH : HOST_V4_LENGTH;
        Py_ssize_t stored = flags & STOREHOST_V6 ? HOST_V6_LENGTH : HOST_V4_LENGTH;
        put64(r + PREPARED_OFFSET_POS_V4 + host_shift(born, stored), (uint64_t)offset);
    }
    Py_RETURN_NONE;
}

PyMethodDef rmq_batch_methods[] = {
    {"half_batch_records", half_batch_records, METH_VARARGS, half_batch_records_doc},
    {"set_prepared_offsets", set_prepared_offsets, METH_VARARGS, set_prepared_offsets_doc},
    {"batch_records", batch_records, METH_VARARGS, batch_records_doc},
    {"offset_msg_ids_text", offset_msg_ids_text, METH_VARARGS, offset_msg_ids_text_doc},
    {"decode_batch_items", decode_batch_items, METH_O, decode_batch_items_doc},
    {"decode_end_batch_handles", decode_end_batch_handles, METH_VARARGS, decode_end_batch_handles_doc},
    {NULL, NULL, 0, NULL},
};
