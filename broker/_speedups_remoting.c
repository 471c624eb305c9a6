/*
 * broker._speedups, remoting part: the ROCKETMQ request/response header, decoded and encoded once per command. Built
 * into the same module as broker/_speedups.c (which adds these functions to it); each has a Python twin in
 * broker/remoting/command.py, and tests/unit/test_speedups.py holds each pair to the same output.
 *
 * - rocketmq_header_fields (command._rocketmq_header_fields_py): a ROCKETMQ header's fields, or None when anything in
 *   it is malformed (command.py then walks it again to name what, with the same messages as before).
 * - encode_rocketmq_header (command._encode_rocketmq_header_py): the header's bytes, or None for what the Python
 *   twin must refuse or convert itself (a value out of range, an extFields entry that is not str: str, a non-dict).
 *
 * In Python the two cost about 7 and 3 us a command, a third of the broker's own work on a single send; here well
 * under one. The layout (the box in command.py's docstring) is repeated here as the sizes below.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define PREFIX_SIZE 13                /* code 2, language 1, version 2, opaque 4, flag 4 */
#define MINIMUM_SIZE (PREFIX_SIZE + 8) /* + remark length, extFields length */
#define MAX_KEY_LENGTH 0x7FFF

static inline int32_t get_i32(const uint8_t *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}

static inline int16_t get_i16(const uint8_t *p) {
    return (int16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint8_t *put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
    return p + 4;
}

static inline uint8_t *put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v;
    return p + 2;
}

/* UTF-8 text of a run of header bytes; invalid bytes become U+FFFD, as Netty's readCharSequence does. */
static inline PyObject *text_of(const uint8_t *p, Py_ssize_t n) {
    return PyUnicode_DecodeUTF8((const char *)p, n, "replace");
}

PyDoc_STRVAR(rocketmq_header_fields_doc,
"rocketmq_header_fields(header) -> (code, language, version, opaque, flag, remark, ext_fields) | None\n\n"
"A ROCKETMQ header's fields (language as its number, remark None when empty; an extFields entry with an empty key\n"
"or value left out), or None when the header is malformed in any way.");

static PyObject *rocketmq_header_fields(PyObject *Py_UNUSED(module), PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "rocketmq_header_fields() takes bytes");
        return NULL;
    }
    const uint8_t *h = (const uint8_t *)PyBytes_AS_STRING(arg);
    Py_ssize_t end = PyBytes_GET_SIZE(arg);
    if (end < MINIMUM_SIZE)
        Py_RETURN_NONE;
    int32_t remark_length = get_i32(h + PREFIX_SIZE);
    Py_ssize_t pos = PREFIX_SIZE + 4;
    if (remark_length < 0 || pos + remark_length + 4 > end)
        Py_RETURN_NONE;
    const uint8_t *remark_at = h + pos;
    pos += remark_length;
    int32_t ext_length = get_i32(h + pos);
    pos += 4;
    if (ext_length != end - pos)
        Py_RETURN_NONE;
    PyObject *ext = PyDict_New(), *remark = NULL;
    if (ext == NULL)
        return NULL;
    while (pos < end) {
        if (pos + 2 > end)
            goto malformed;
        int16_t key_length = get_i16(h + pos);
        Py_ssize_t key_end = pos + 2 + key_length;
        if (key_length < 0 || key_end + 4 > end)
            goto malformed;
        int32_t value_length = get_i32(h + key_end);
        Py_ssize_t value_end = key_end + 4 + value_length;
        if (value_length < 0 || value_end > end)
            goto malformed;
        if (key_length && value_length) {  /* Java reads a zero length as null: absent */
            PyObject *key = text_of(h + pos + 2, key_length);
            PyObject *value = key ? text_of(h + key_end + 4, value_length) : NULL;
            int failed = value == NULL || PyDict_SetItem(ext, key, value) < 0;
            Py_XDECREF(key);
            Py_XDECREF(value);
            if (failed)
                goto error;
        }
        pos = value_end;
    }
    if (remark_length) {
        remark = text_of(remark_at, remark_length);
        if (remark == NULL)
            goto error;
    } else {
        remark = Py_NewRef(Py_None);
    }
    return Py_BuildValue("(iiiiiNN)", (int)get_i16(h), (int)h[2], (int)get_i16(h + 3), (int)get_i32(h + 5),
                         (int)get_i32(h + 9), remark, ext);
malformed:
    Py_DECREF(ext);
    Py_RETURN_NONE;
error:
    Py_DECREF(ext);
    return NULL;
}

/* The UTF-8 bytes of a str (lone surrogates as '?', as Java's String.getBytes(UTF_8)): a view of its own UTF-8
 * when it has one, else a new bytes object in *owned. Returns -1 with an exception set on failure. */
static int utf8_view(PyObject *text, const char **data, Py_ssize_t *size, PyObject **owned) {
    *owned = NULL;
    *data = PyUnicode_AsUTF8AndSize(text, size);
    if (*data != NULL)
        return 0;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
        return -1;
    PyErr_Clear();
    *owned = PyUnicode_AsEncodedString(text, "utf-8", "replace");
    if (*owned == NULL)
        return -1;
    *data = PyBytes_AS_STRING(*owned);
    *size = PyBytes_GET_SIZE(*owned);
    return 0;
}

static int in_range(long long v, long long low, long long high) {
    return v >= low && v <= high;
}

PyDoc_STRVAR(encode_rocketmq_header_doc,
"encode_rocketmq_header(code, language, version, opaque, flag, remark, ext_fields) -> bytes | None\n\n"
"The ROCKETMQ header of a command; None when a value does not fit its field or ext_fields is not a dict of\n"
"str: str (the Python twin then raises the error that names it).");

static PyObject *encode_rocketmq_header(PyObject *Py_UNUSED(module), PyObject *args) {
    long long code, language, version, opaque, flag;
    PyObject *remark, *ext;
    if (!PyArg_ParseTuple(args, "LLLLLOO:encode_rocketmq_header", &code, &language, &version, &opaque, &flag,
                          &remark, &ext)) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError) && !PyErr_ExceptionMatches(PyExc_TypeError))
            return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (!in_range(code, INT16_MIN, INT16_MAX) || !in_range(language, 0, 255) || !in_range(version, INT16_MIN, INT16_MAX)
        || !in_range(opaque, INT32_MIN, INT32_MAX) || !in_range(flag, INT32_MIN, INT32_MAX) || !PyDict_CheckExact(ext)
        || (remark != Py_None && !PyUnicode_Check(remark)))
        Py_RETURN_NONE;
    Py_ssize_t n = PyDict_GET_SIZE(ext);
    /* the UTF-8 of each key and value, then the remark's */
    const char **data = PyMem_Malloc(sizeof(char *) * (size_t)(2 * n + 1));
    Py_ssize_t *sizes = PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(2 * n + 1));
    PyObject **owned = PyMem_Calloc((size_t)(2 * n + 1), sizeof(PyObject *));
    PyObject *result = NULL;
    if (data == NULL || sizes == NULL || owned == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t total = MINIMUM_SIZE, dict_pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(ext, &dict_pos, &key, &value)) {
        if (i >= 2 * n || !PyUnicode_CheckExact(key) || !PyUnicode_CheckExact(value)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (utf8_view(key, &data[i], &sizes[i], &owned[i]) < 0
            || utf8_view(value, &data[i + 1], &sizes[i + 1], &owned[i + 1]) < 0)
            goto done;
        if (sizes[i] > MAX_KEY_LENGTH || sizes[i + 1] > INT32_MAX - total) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        total += 6 + sizes[i] + sizes[i + 1];
        i += 2;
    }
    Py_ssize_t remark_size = 0;
    if (remark != Py_None && PyUnicode_GET_LENGTH(remark)) {
        if (utf8_view(remark, &data[i], &remark_size, &owned[i]) < 0)
            goto done;
        total += remark_size;
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL)
        goto done;
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(result);
    p = put_u16(p, (uint16_t)code);
    *p++ = (uint8_t)language;
    p = put_u16(p, (uint16_t)version);
    p = put_u32(p, (uint32_t)opaque);
    p = put_u32(p, (uint32_t)flag);
    p = put_u32(p, (uint32_t)remark_size);
    if (remark_size) {
        memcpy(p, data[i], (size_t)remark_size);
        p += remark_size;
    }
    p = put_u32(p, (uint32_t)(total - MINIMUM_SIZE - remark_size));
    for (Py_ssize_t k = 0; k < i; k += 2) {
        p = put_u16(p, (uint16_t)sizes[k]);
        memcpy(p, data[k], (size_t)sizes[k]);
        p += sizes[k];
        p = put_u32(p, (uint32_t)sizes[k + 1]);
        memcpy(p, data[k + 1], (size_t)sizes[k + 1]);
        p += sizes[k + 1];
    }
done:
    if (owned != NULL) {
        for (Py_ssize_t k = 0; k < 2 * n + 1; k++)
            Py_XDECREF(owned[k]);
    }
    PyMem_Free(owned);
    PyMem_Free(sizes);
    PyMem_Free((void *)data);
    return result;
}

PyMethodDef rmq_remoting_methods[] = {
    {"rocketmq_header_fields", rocketmq_header_fields, METH_O, rocketmq_header_fields_doc},
    {"encode_rocketmq_header", encode_rocketmq_header, METH_VARARGS, encode_rocketmq_header_doc},
    {NULL, NULL, 0, NULL},
};
