/*
 * broker._speedups, batch part: the SEND_BATCH_MESSAGE body (broker/common/message_batch.py's layout), read in one
 * pass. Built into the same module as broker/_speedups.c (which adds this function to it); its Python twin is
 * message_batch._decode_batch_items_py, and tests/unit/test_speedups.py holds the pair to the same output.
 *
 * - decode_batch_items: each message's (body, properties dict, flag, PROPERTIES bytes), or None when anything in the
 *   body is malformed (message_batch.py then walks it again in Python to raise CorruptRecord with the same message).
 * - decode_end_batch_handles: the handles of an END_TRANSACTION_BATCH body (broker/remoting/transaction_batch.py's
 *   layout), or None when it is malformed (its Python twin then names the fault). About 2 us a handle in Python.
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

/* 1 when the whole run is UTF-8 (Python's strict decode of the PROPERTIES field accepts it), else 0. ASCII, nearly
 * every properties field, is checked without making a str. */
static int properties_are_utf8(const uint8_t *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n && p[i] < 0x80)
        i++;
    if (i == n)
        return 1;
    PyObject *text = PyUnicode_DecodeUTF8((const char *)p + i, n - i, NULL);
    if (text == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(text);
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
    while (items != NULL && pos < end) {
        const uint8_t *b = base + pos;
        if (end - pos < ITEM_HEAD_SIZE)
            goto malformed;
        int32_t size = get_s32(b), flag = get_s32(b + FLAG_POS), body_len = get_s32(b + BODY_LENGTH_POS);
        Py_ssize_t cur = pos + ITEM_HEAD_SIZE;
        if (body_len < 0 || body_len > end - cur || end - cur - body_len < PROPERTIES_LENGTH_SIZE)
            goto malformed;
        const uint8_t *body = base + cur;
        cur += body_len;
        int16_t props_len = (int16_t)(base[cur] << 8 | base[cur + 1]);
        cur += PROPERTIES_LENGTH_SIZE;
        if (props_len < 0 || props_len > end - cur || cur + props_len - pos != size)
            goto malformed;
        const uint8_t *props = base + cur;
        if (!properties_are_utf8(props, props_len))
            goto malformed;
        PyObject *properties = rmq_decode_properties(props, props_len, &names);
        if (properties == NULL)
            goto done;
        PyObject *item = Py_BuildValue("(y#Niy#)", (const char *)body, (Py_ssize_t)body_len, properties, (int)flag,
                                       (const char *)props, (Py_ssize_t)props_len);
        if (item == NULL || PyList_Append(items, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
        pos = cur + props_len;
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

PyMethodDef rmq_batch_methods[] = {
    {"decode_batch_items", decode_batch_items, METH_O, decode_batch_items_doc},
    {"decode_end_batch_handles", decode_end_batch_handles, METH_VARARGS, decode_end_batch_handles_doc},
    {NULL, NULL, 0, NULL},
};
