/*
 * broker._speedups, remoting part: the ROCKETMQ request/response header, decoded and encoded once per command. Built
 * into the same module as broker/_speedups.c (which adds these functions to it); each has a Python twin in
 * broker/remoting/command.py, and tests/unit/test_speedups.py holds each pair to the same output.
 *
 * - rocketmq_header_fields (command._rocketmq_header_fields_py): a ROCKETMQ header's fields, or None when anything in
 *   it is malformed (command.py then walks it again to name what, with the same messages as before).
 * - encode_rocketmq_header (command._encode_rocketmq_header_py): the header's bytes, or None for what the Python
 *   twin must refuse or convert itself (a value out of range, an extFields entry that is not str: str, a non-dict).
 * - cut_frames (frame._cut_frames_py): the whole frames of a read, with the decoder's checks and their words.
 * - rocketmq_command (command._rocketmq_command_py): a ROCKETMQ frame's RemotingCommand, its slots filled directly.
 * - rocketmq_frame (command._rocketmq_frame_py): a ROCKETMQ command's frame prefix and header as one bytes.
 *   These three are the event loop's own work per request (bench/request_cost.py --sockets);
 *   tests/unit/test_speedups_frames.py holds them to their twins.
 *
 * In Python the two cost about 7 and 3 us a command, a third of the broker's own work on a single send; here well
 * under one. The layout (the box in command.py's docstring) is repeated here as the sizes below.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdio.h>
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

/* A ROCKETMQ header's fields: 1 with remark (None when empty) and ext (a new dict) set, 0 when it is malformed,
 * -1 with an exception set on failure. */
static int header_fields(const uint8_t *h, Py_ssize_t end, PyObject **remark, PyObject **ext) {
    if (end < MINIMUM_SIZE)
        return 0;
    int32_t remark_length = get_i32(h + PREFIX_SIZE);
    Py_ssize_t pos = PREFIX_SIZE + 4;
    if (remark_length < 0 || pos + remark_length + 4 > end)
        return 0;
    const uint8_t *remark_at = h + pos;
    pos += remark_length;
    int32_t ext_length = get_i32(h + pos);
    pos += 4;
    if (ext_length != end - pos)
        return 0;
    *ext = PyDict_New();
    if (*ext == NULL)
        return -1;
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
            int failed = value == NULL || PyDict_SetItem(*ext, key, value) < 0;
            Py_XDECREF(key);
            Py_XDECREF(value);
            if (failed)
                goto error;
        }
        pos = value_end;
    }
    *remark = remark_length ? text_of(remark_at, remark_length) : Py_NewRef(Py_None);
    if (*remark == NULL)
        goto error;
    return 1;
malformed:
    Py_CLEAR(*ext);
    return 0;
error:
    Py_CLEAR(*ext);
    return -1;
}

static PyObject *rocketmq_header_fields(PyObject *Py_UNUSED(module), PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "rocketmq_header_fields() takes bytes");
        return NULL;
    }
    const uint8_t *h = (const uint8_t *)PyBytes_AS_STRING(arg);
    PyObject *remark = NULL, *ext = NULL;
    int found = header_fields(h, PyBytes_GET_SIZE(arg), &remark, &ext);
    if (found <= 0)
        return found < 0 ? NULL : Py_NewRef(Py_None);
    return Py_BuildValue("(iiiiiNN)", (int)get_i16(h), (int)h[2], (int)get_i16(h + 3), (int)get_i32(h + 5),
                         (int)get_i32(h + 9), remark, ext);
}

/* An instance of a slotted dataclass made without its __init__: each field set through its slot's descriptor, as
 * a frozen dataclass's own __init__ does with object.__setattr__ (about 2 us a RemotingCommand in Python). */
#define MAX_SLOTS 9
typedef struct {
    PyTypeObject *type;
    PyObject *slots[MAX_SLOTS];
    Py_ssize_t count;
} SlottedClass;

static SlottedClass frame_class, command_class;
static PyObject *serialize_types, *languages, *language_other;  /* bind_frame's and bind_command's, for good */

static int bind_class(SlottedClass *c, PyObject *cls, Py_ssize_t count) {
    PyObject *slots = PyType_Check(cls) ? PyObject_GetAttrString(cls, "__slots__") : NULL;
    if (slots == NULL || !PyTuple_Check(slots) || PyTuple_GET_SIZE(slots) != count) {
        Py_XDECREF(slots);
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "a slotted class of %zd fields expected", count);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *slot = PyObject_GetAttr(cls, PyTuple_GET_ITEM(slots, i));
        if (slot == NULL || Py_TYPE(slot)->tp_descr_set == NULL) {
            Py_XDECREF(slot);
            Py_DECREF(slots);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "a field without a slot descriptor");
            return -1;
        }
        Py_XSETREF(c->slots[i], slot);
    }
    Py_DECREF(slots);
    Py_XSETREF(c->type, (PyTypeObject *)Py_NewRef(cls));
    c->count = count;
    return 0;
}

/* A new instance of ``c`` holding ``values`` (borrowed), or NULL with an exception set. */
static PyObject *new_slotted(SlottedClass *c, PyObject *const *values) {
    PyObject *obj = c->type->tp_alloc(c->type, 0);
    for (Py_ssize_t i = 0; obj != NULL && i < c->count; i++) {
        if (Py_TYPE(c->slots[i])->tp_descr_set(c->slots[i], obj, values[i]) < 0)
            Py_CLEAR(obj);
    }
    return obj;
}

PyDoc_STRVAR(bind_frame_doc,
"bind_frame(Frame, serialize_types)\n\n"
"The class cut_frames makes, and the SerializeType members by number.");

static PyObject *bind_frame(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *frame, *types;
    if (!PyArg_ParseTuple(args, "OO!:bind_frame", &frame, &PyTuple_Type, &types) || bind_class(&frame_class, frame, 3) < 0)
        return NULL;
    Py_XSETREF(serialize_types, Py_NewRef(types));
    Py_RETURN_NONE;
}

PyDoc_STRVAR(bind_command_doc,
"bind_command(RemotingCommand, languages, language_other)\n\n"
"The class rocketmq_command makes, the LanguageCode members by number and the one for an unknown number.");

static PyObject *bind_command(PyObject *Py_UNUSED(module), PyObject *args) {
    PyObject *command, *names, *other;
    if (!PyArg_ParseTuple(args, "OO!O:bind_command", &command, &PyDict_Type, &names, &other) ||
        bind_class(&command_class, command, 9) < 0)
        return NULL;
    Py_XSETREF(languages, Py_NewRef(names));
    Py_XSETREF(language_other, Py_NewRef(other));
    Py_RETURN_NONE;
}

static int bound(SlottedClass *c) {
    if (c->type != NULL && serialize_types != NULL)
        return 1;
    PyErr_SetString(PyExc_RuntimeError, "bind_frame() and bind_command() first");
    return 0;
}

PyDoc_STRVAR(rocketmq_command_doc,
"rocketmq_command(header, body) -> RemotingCommand | None\n\n"
"The command of a ROCKETMQ frame (command.decode's), or None when its header is malformed in any way.");

static PyObject *rocketmq_command(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "rocketmq_command(header: bytes, body)");
        return NULL;
    }
    if (!bound(&command_class))
        return NULL;
    const uint8_t *h = (const uint8_t *)PyBytes_AS_STRING(args[0]);
    PyObject *remark = NULL, *ext = NULL;
    int found = header_fields(h, PyBytes_GET_SIZE(args[0]), &remark, &ext);
    if (found <= 0)
        return found < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *result = NULL, *numbers[4] = {NULL, NULL, NULL, NULL};
    PyObject *language_number = PyLong_FromLong(h[2]);
    PyObject *language = language_number ? PyDict_GetItemWithError(languages, language_number) : NULL;  /* borrowed */
    Py_XDECREF(language_number);
    if (language == NULL && PyErr_Occurred())
        goto done;
    numbers[0] = PyLong_FromLong(get_i16(h));
    numbers[1] = PyLong_FromLong(get_i16(h + 3));
    numbers[2] = PyLong_FromLong(get_i32(h + 5));
    numbers[3] = PyLong_FromLong(get_i32(h + 9));
    if (!numbers[0] || !numbers[1] || !numbers[2] || !numbers[3])
        goto done;
    PyObject *values[9] = {numbers[0], language ? language : language_other, numbers[1], numbers[2], numbers[3],
                           remark, ext, args[1], PyTuple_GET_ITEM(serialize_types, 1)};
    result = new_slotted(&command_class, values);
done:
    for (int i = 0; i < 4; i++)
        Py_XDECREF(numbers[i]);
    Py_DECREF(remark);
    Py_DECREF(ext);
    return result;
}

#define LENGTH_FIELD_SIZE 4
#define MARKER_SIZE 4
#define FRAME_PREFIX_SIZE 8

/* MalformedFrame's text for the frame at ``p`` (``available`` bytes of it here), or 0 into *frame_end when it is
 * not all here yet, else where it ends; frame.FrameDecoder._next_frame_end's checks in its order and words. */
static PyObject *frame_fault(const uint8_t *p, Py_ssize_t available, Py_ssize_t max_frame_length,
                             Py_ssize_t *frame_end) {
    *frame_end = 0;
    if (available < LENGTH_FIELD_SIZE)
        return NULL;
    int32_t length = get_i32(p);
    if (length < MARKER_SIZE)
        return PyUnicode_FromFormat("frame length %d is less than the %d-byte header marker", (int)length,
                                    MARKER_SIZE);
    if ((Py_ssize_t)length + LENGTH_FIELD_SIZE > max_frame_length)
        return PyUnicode_FromFormat("frame of %zd bytes exceeds the maximum frame length %zd",
                                    (Py_ssize_t)length + LENGTH_FIELD_SIZE, max_frame_length);
    if (available < FRAME_PREFIX_SIZE)
        return NULL;
    uint32_t marker = (uint32_t)get_i32(p + 4);
    int32_t header_length = (int32_t)(marker & 0xFFFFFF);
    if (header_length > length - MARKER_SIZE)
        return PyUnicode_FromFormat("header length %d exceeds frame length %d - %d", (int)header_length,
                                    (int)length, MARKER_SIZE);
    uint32_t type_code = marker >> 24;
    if (type_code >= (uint32_t)PyTuple_GET_SIZE(serialize_types)) {
        char text[16];
        snprintf(text, sizeof(text), "%#010x", marker);
        return PyUnicode_FromFormat("unknown serialize type %u in header marker %s", type_code, text);
    }
    if ((Py_ssize_t)length + LENGTH_FIELD_SIZE <= available)
        *frame_end = (Py_ssize_t)length + LENGTH_FIELD_SIZE;
    return NULL;
}

PyDoc_STRVAR(cut_frames_doc,
"cut_frames(buffer, max_frame_length) -> (frames, end, fault)\n\n"
"The whole frames at the head of ``buffer`` (Frames, their header and body copied into bytes), where the bytes not\n"
"yet a whole frame begin, and MalformedFrame's text for the frame there when it is malformed, else None.");

static PyObject *cut_frames(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs) {
    Py_ssize_t max_frame_length;
    if (nargs != 2 || (max_frame_length = PyLong_AsSsize_t(args[1])) == -1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "cut_frames(buffer, max_frame_length: int)");
        return NULL;
    }
    if (!bound(&frame_class))
        return NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(args[0], &buf, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *base = buf.buf;
    Py_ssize_t pos = 0, frame_end;
    PyObject *frames = PyList_New(0), *fault = NULL, *result = NULL;
    while (frames != NULL) {
        fault = frame_fault(base + pos, buf.len - pos, max_frame_length, &frame_end);
        if (fault != NULL || frame_end == 0)
            break;
        const uint8_t *p = base + pos;
        Py_ssize_t header_length = (Py_ssize_t)(get_i32(p + 4) & 0xFFFFFF);
        PyObject *header = PyBytes_FromStringAndSize((const char *)p + FRAME_PREFIX_SIZE, header_length);
        PyObject *body = header ? PyBytes_FromStringAndSize((const char *)p + FRAME_PREFIX_SIZE + header_length,
                                                            frame_end - FRAME_PREFIX_SIZE - header_length) : NULL;
        PyObject *values[3] = {PyTuple_GET_ITEM(serialize_types, p[4]), header, body};
        PyObject *frame = body ? new_slotted(&frame_class, values) : NULL;
        Py_XDECREF(header);
        Py_XDECREF(body);
        if (frame == NULL || PyList_Append(frames, frame) < 0)
            Py_CLEAR(frames);
        Py_XDECREF(frame);
        pos += frame_end;
    }
    if (frames != NULL && !PyErr_Occurred())
        result = Py_BuildValue("(NnO)", frames, pos, fault ? fault : Py_None);
    else
        Py_XDECREF(frames);
    Py_XDECREF(fault);
    PyBuffer_Release(&buf);
    return result;
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

/* The header's bytes after ``room`` bytes left for the caller (a frame's prefix), or None (a new reference) for
 * what the Python twin refuses or converts. */
static PyObject *encode_header(long long code, long long language, long long version, long long opaque, long long flag,
                               PyObject *remark, PyObject *ext, Py_ssize_t room) {
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
    Py_ssize_t total = MINIMUM_SIZE, dict_pos = 0, i = 0;  /* the header's size, without the room */
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
    result = PyBytes_FromStringAndSize(NULL, room + total);
    if (result == NULL)
        goto done;
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(result) + room;
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
    return encode_header(code, language, version, opaque, flag, remark, ext, 0);
}

PyDoc_STRVAR(rocketmq_frame_doc,
"rocketmq_frame(command) -> [head, body] | None\n\n"
"command.encode_parts of a ROCKETMQ command whose body is bytes: the frame's prefix and header in one bytes, then\n"
"the body; None for what the Python path converts or refuses (another serialize type or body, a value that does\n"
"not fit, extFields not a dict of str: str).");

static PyObject *rocketmq_frame(PyObject *Py_UNUSED(module), PyObject *cmd) {
    if (!bound(&command_class))
        return NULL;
    if (Py_TYPE(cmd) != command_class.type)
        Py_RETURN_NONE;
    enum { CODE, LANGUAGE, VERSION, OPAQUE, FLAG, REMARK, EXT, BODY, SERIALIZE_TYPE };
    PyObject *values[MAX_SLOTS] = {NULL}, *result = NULL, *head = NULL;
    long long numbers[5];
    for (int i = 0; i < MAX_SLOTS; i++) {
        values[i] = Py_TYPE(command_class.slots[i])->tp_descr_get(command_class.slots[i], cmd, (PyObject *)command_class.type);
        if (values[i] == NULL)
            goto done;
    }
    if (values[SERIALIZE_TYPE] != PyTuple_GET_ITEM(serialize_types, 1) || !PyBytes_CheckExact(values[BODY]) ||
        Py_TYPE(values[LANGUAGE]) != Py_TYPE(language_other))  /* a plain int: the Python path converts it */
        goto plain_python;
    for (int i = 0; i < 5; i++) {
        if (!PyLong_Check(values[i]))
            goto plain_python;
        int overflow;
        numbers[i] = PyLong_AsLongLongAndOverflow(values[i], &overflow);
        if (overflow)
            goto plain_python;
    }
    head = encode_header(numbers[CODE], numbers[LANGUAGE], numbers[VERSION], numbers[OPAQUE], numbers[FLAG],
                         values[REMARK], values[EXT], FRAME_PREFIX_SIZE);
    if (head == NULL || head == Py_None) {
        result = head;
        head = NULL;
        goto done;
    }
    Py_ssize_t header_length = PyBytes_GET_SIZE(head) - FRAME_PREFIX_SIZE;
    Py_ssize_t length = MARKER_SIZE + header_length + PyBytes_GET_SIZE(values[BODY]);
    if (header_length > 0xFFFFFF || length > INT32_MAX)
        goto plain_python;
    uint8_t *p = (uint8_t *)PyBytes_AS_STRING(head);
    put_u32(put_u32(p, (uint32_t)length), 1u << 24 | (uint32_t)header_length);
    result = Py_BuildValue("[OO]", head, values[BODY]);
    goto done;
plain_python:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(head);
    for (int i = 0; i < MAX_SLOTS; i++)
        Py_XDECREF(values[i]);
    return result;
}

PyMethodDef rmq_remoting_methods[] = {
    {"rocketmq_header_fields", rocketmq_header_fields, METH_O, rocketmq_header_fields_doc},
    {"bind_frame", bind_frame, METH_VARARGS, bind_frame_doc},
    {"bind_command", bind_command, METH_VARARGS, bind_command_doc},
    {"rocketmq_command", (PyCFunction)(void (*)(void))rocketmq_command, METH_FASTCALL, rocketmq_command_doc},
    {"cut_frames", (PyCFunction)(void (*)(void))cut_frames, METH_FASTCALL, cut_frames_doc},
    {"rocketmq_frame", rocketmq_frame, METH_O, rocketmq_frame_doc},
    {"encode_rocketmq_header", encode_rocketmq_header, METH_VARARGS, encode_rocketmq_header_doc},
    {NULL, NULL, 0, NULL},
};
