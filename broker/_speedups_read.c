/*
 * broker._speedups, read part: the unfiltered pull's walk over its ConsumeQueue units (broker/store/get_message.py).
 * Built into the same module as broker/_speedups.c (which adds this function to it); its Python twin is
 * get_message._cq_runs_py, and tests/unit/test_speedups_read.py holds the pair to the same output.
 *
 * - cq_runs: the records a pull takes (up to a count and a byte cap) as runs of records that lie back to back in one
 *   CommitLog file, each run read later as one view of the mapped file. In Python the per-unit loop cost about half
 *   a microsecond a message of the broker's main thread, a tenth of a batched pull's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_speedups.h"

#define CQ_UNIT_SIZE 20       /* commitLogOffset 8, size 4, tagsCode 8 (store/layout.py's CQ_UNIT) */
#define BLANK_UNIT_SIZE 0x7FFFFFFF

PyDoc_STRVAR(cq_runs_doc,
"cq_runs(raw, byte_cap, file_size) -> ([(first_index, commit_log_offset, length), ...], [commit_log_offset, ...])\n"
"                                     | None\n\n"
"The runs of records named by the ConsumeQueue units ``raw`` (whole units), taken while their sizes add up to at\n"
"most ``byte_cap`` (the first always), and each record's CommitLog offset; None when a unit is blank.");

/* One (first_index, commit_log_offset, length) run appended to ``runs``; -1 with an exception set on failure. */
static int append_run(PyObject *runs, Py_ssize_t first, long long phys, long long length) {
    PyObject *run = Py_BuildValue("(nLL)", first, phys, length);
    int rc = run == NULL ? -1 : PyList_Append(runs, run);
    Py_XDECREF(run);
    return rc;
}

static PyObject *cq_runs(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer raw;
    long long byte_cap, file_size;
    if (!PyArg_ParseTuple(args, "y*LL:cq_runs", &raw, &byte_cap, &file_size))
        return NULL;
    PyObject *runs = PyList_New(0), *offsets = PyList_New(0), *result = NULL;
    if (runs == NULL || offsets == NULL)
        goto done;
    if (file_size <= 0) {
        PyErr_SetString(PyExc_ValueError, "file_size must be positive");
        goto done;
    }
    const uint8_t *p = raw.buf;
    Py_ssize_t count = raw.len / CQ_UNIT_SIZE;
    long long total = 0, run_end = -1, run_phys = 0, run_length = 0;
    Py_ssize_t taken = 0, run_first = 0;
    for (Py_ssize_t i = 0; i < count; i++, p += CQ_UNIT_SIZE) {
        long long phys = (long long)get64(p);
        int32_t size = (int32_t)get32(p + 8);
        if (size == BLANK_UNIT_SIZE) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        total += size;
        if (taken && total > byte_cap)
            break;
        if (!(taken && phys == run_end && phys % file_size)) {  /* a new run: not back to back, or a new file */
            if (taken && append_run(runs, run_first, run_phys, run_length) < 0)
                goto done;
            run_first = taken;
            run_phys = phys;
            run_length = 0;
        }
        run_length += size;
        PyObject *offset = PyLong_FromLongLong(phys);
        if (offset == NULL || PyList_Append(offsets, offset) < 0) {
            Py_XDECREF(offset);
            goto done;
        }
        Py_DECREF(offset);
        taken++;
        run_end = phys + size;
    }
    if (taken && append_run(runs, run_first, run_phys, run_length) < 0)
        goto done;
    result = PyTuple_Pack(2, runs, offsets);
done:
    Py_XDECREF(runs);
    Py_XDECREF(offsets);
    PyBuffer_Release(&raw);
    return result;
}

PyMethodDef rmq_read_methods[] = {
    {"cq_runs", cq_runs, METH_VARARGS, cq_runs_doc},
    {NULL, NULL, 0, NULL},
};
