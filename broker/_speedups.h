/*
 * What the parts of broker._speedups share (broker/_speedups.c defines these; _speedups_batch.c uses them).
 */
#ifndef RMQ_SPEEDUPS_H
#define RMQ_SPEEDUPS_H

#include <Python.h>
#include <stdint.h>

/* The last few property names seen: they repeat in nearly every message, and reusing their str objects saves an
 * allocation and a UTF-8 decode each. The caller releases ``names[0:count]`` when done. */
#define NAME_CACHE 16
typedef struct {
    PyObject *names[NAME_CACHE];
    int count;
} NameCache;

/* MessageDecoder.string2messageProperties over PROPERTIES bytes (name \x01 value \x02 ...): a new dict of the
 * entries whose name and value are both non-empty; NULL with UnicodeDecodeError when an entry kept is not UTF-8. */
PyObject *rmq_decode_properties(const uint8_t *p, Py_ssize_t n, NameCache *names);

#endif
