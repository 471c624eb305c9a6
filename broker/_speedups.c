/*
 * broker._speedups: the store's per-message loops in C, each with a Python twin that does the same where this module
 * was not built (no C compiler at install time). tests/unit/test_speedups.py holds each pair to the same output.
 *
 * - pack_records (commit_log._pack_records_py): lays a put's records out in RocketMQ's CommitLog format straight
 *   into the mapped file, with their queue offsets, physical offsets and store time. In Python the per-message work
 *   (a dozen attribute reads, a struct.pack of 15 fields, list appends) costs about 1.2 us, more than the disk
 *   needs for a 1 KB message; here about 0.2 us. The bytes are checked and sized with the GIL held; the copying
 *   and the CRCs run without it, so the broker's other threads go on meanwhile.
 * - crc32: zlib.crc32, folded with carry-less multiplication where the CPU has it.
 * - java_hash (message._java_hash_py): java.lang.String.hashCode().
 * - scan_records (dispatch._scan_records_py) and put_index_entries (index_file._put_index_entries_py): dispatch's
 *   reading of records and writing of IndexFile entries.
 * - check_records (record._check_records_py): recovery's walk over the records it must trust.
 * - rocketmq_header_fields and encode_rocketmq_header: the remoting header, in broker/_speedups_remoting.c (added
 *   to this module at its import).
 * - decode_batch_items: the SEND_BATCH_MESSAGE body, in broker/_speedups_batch.c (added likewise).
 * - pull_columns: a PULL_MESSAGE body's records as Arrow column buffers (the Spark source's), in
 *   broker/_speedups_pull.c (added likewise).
 * - send_record: a single send of the common shape, from its header's extFields to its CommitLog record, in
 *   broker/_speedups_send.c (added likewise).
 *
 * The byte layouts are broker/common/record.py's (the CommitLog record) and broker/store/layout.py's (the IndexFile);
 * the numbers below repeat theirs, and tests/unit/test_record_layout.py holds each one to them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "_speedups.h"

/* -- CRC-32 ---------------------------------------------------------------------------------------------------------
 * zlib's table-driven crc32 runs at about 2.5 GB/s here: for a 1 KB body, half of what packing a record costs. With
 * carry-less multiplication (PCLMULQDQ) the CRC folds 64 bytes a step instead, several times faster: Intel's "Fast
 * CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction" (2009), whose constants for the bit-reflected
 * CRC-32 polynomial are below. zlib takes the tail (under 16 bytes) and any CPU without the instructions. */

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define CLMUL_TARGET __attribute__((target("pclmul,sse4.1")))

/* (low, high) pairs: folding across 4 x 128 bits, across 128 bits, 64 -> 32 bits, and Barrett's (P', mu). */
#define FOLD_4X128 0x154442bd4ULL, 0x1c6e41596ULL
#define FOLD_128 0x1751997d0ULL, 0x0ccaa009eULL
#define FOLD_64 0x163cd6124ULL
#define BARRETT 0x1db710641ULL, 0x1f7011641ULL

CLMUL_TARGET static inline __m128i pair(uint64_t low, uint64_t high) {
    return _mm_set_epi64x((long long)high, (long long)low);
}

/* x * (k.low, k.high) folded onto the next 128 bits of data. */
CLMUL_TARGET static inline __m128i fold(__m128i x, __m128i k, __m128i data) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), data);
}

CLMUL_TARGET static inline __m128i load(const uint8_t *p) {
    return _mm_loadu_si128((const __m128i *)p);
}

/* The CRC register after ``len`` bytes (at least 64, a multiple of 16) from register ``reg`` (pre-inverted). */
CLMUL_TARGET static uint32_t crc32_fold(const uint8_t *p, size_t len, uint32_t reg) {
    __m128i k = pair(FOLD_4X128);
    __m128i a = _mm_xor_si128(load(p), _mm_cvtsi32_si128((int)reg));
    __m128i b = load(p + 16), c = load(p + 32), d = load(p + 48);
    for (p += 64, len -= 64; len >= 64; p += 64, len -= 64) {
        a = fold(a, k, load(p));
        b = fold(b, k, load(p + 16));
        c = fold(c, k, load(p + 32));
        d = fold(d, k, load(p + 48));
    }
    k = pair(FOLD_128);
    a = fold(fold(fold(a, k, b), k, c), k, d);
    for (; len >= 16; p += 16, len -= 16)
        a = fold(a, k, load(p));
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
    /* 128 -> 64 bits: the high half plus the low half times x^64 mod P */
    a = _mm_xor_si128(_mm_srli_si128(a, 8), _mm_clmulepi64_si128(a, k, 0x10));
    /* 64 -> 32 bits */
    a = _mm_xor_si128(_mm_srli_si128(a, 4),
                      _mm_clmulepi64_si128(_mm_and_si128(a, low32), pair(FOLD_64, 0), 0x00));
    /* Barrett reduction to the 32-bit remainder */
    const __m128i barrett = pair(BARRETT);
    __m128i t = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(a, low32), barrett, 0x10), low32);
    a = _mm_xor_si128(a, _mm_clmulepi64_si128(t, barrett, 0x00));
    return (uint32_t)_mm_extract_epi32(a, 1);
}

static int have_clmul;

static void detect_cpu(void) {
    __builtin_cpu_init();
    have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}
#else
static const int have_clmul = 0;
static uint32_t crc32_fold(const uint8_t *p, size_t len, uint32_t reg) { (void)p; (void)len; return reg; }
static void detect_cpu(void) {}
#endif

/* zlib.crc32(data, crc) */
uint32_t rmq_crc32(uint32_t crc, const uint8_t *p, size_t len) {
    if (have_clmul && len >= 64) {
        size_t folded = len & ~(size_t)15;
        crc = ~crc32_fold(p, folded, ~crc);
        p += folded;
        len -= folded;
    }
    return (uint32_t)crc32_z(crc, p, len);
}

PyDoc_STRVAR(crc32_doc, "crc32(data, value=0) -> int\n\nzlib.crc32, several times faster on CPUs with PCLMULQDQ.");

static PyObject *crc32_py(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer data;
    unsigned int value = 0;
    if (!PyArg_ParseTuple(args, "y*|I:crc32", &data, &value))
        return NULL;
    uint32_t crc;
    Py_BEGIN_ALLOW_THREADS
    crc = rmq_crc32(value, data.buf, (size_t)data.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(crc);
}

/* -- java.lang.String.hashCode ---------------------------------------------------------------------------------------
 * Tags codes and IndexFile slots hash text as Java does: the 31-polynomial over UTF-16 code units, a code point past
 * U+FFFF counting as its surrogate pair. */

static int32_t java_hash_of(PyObject *text) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    uint32_t h = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c > 0xFFFF) {
            c -= 0x10000;
            h = 31 * h + (0xD800 + (c >> 10));
            c = 0xDC00 + (c & 0x3FF);
        }
        h = 31 * h + c;
    }
    return (int32_t)h;
}

PyDoc_STRVAR(java_hash_doc, "java_hash(text) -> int\n\njava.lang.String.hashCode(), as a signed 32-bit int.");

static PyObject *java_hash_py(PyObject *Py_UNUSED(module), PyObject *text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "java_hash() takes a str");
        return NULL;
    }
    return PyLong_FromLong(java_hash_of(text));
}

/* -- IndexFile entries -----------------------------------------------------------------------------------------------
 * broker/store/layout.py owns the format: a 40-byte header, then slot_num 4-byte slots, then 20-byte entries
 * (keyHash, phyOffset, timeDiff, prevIndex). */

#define INDEX_HEADER_SIZE 40
#define INDEX_SLOT_SIZE 4
#define INDEX_ENTRY_SIZE 20
#define INVALID_INDEX 0

PyDoc_STRVAR(put_index_entries_doc,
"put_index_entries(buf, slot_num, index_count, begin_timestamp, begin_phy_offset, items)\n"
"    -> (index_count, new_slots, begin_timestamp, begin_phy_offset)\n\n"
"IndexFile.put_key for each (key, phy_offset, store_timestamp) of ``items``, all of which must fit: each entry is\n"
"written before the slot that points to it. ``new_slots`` counts the slots that were empty.");

static PyObject *put_index_entries(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer buf;
    Py_ssize_t slot_num, number;
    long long begin_timestamp, begin_phy_offset;
    PyObject *items;
    if (!PyArg_ParseTuple(args, "w*nnLLO!:put_index_entries", &buf, &slot_num, &number, &begin_timestamp,
                          &begin_phy_offset, &PyList_Type, &items))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = PyList_GET_SIZE(items), new_slots = 0;
    if (slot_num <= 0 || number < 1 ||
        INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE + (number + n) * INDEX_ENTRY_SIZE > buf.len) {
        PyErr_SetString(PyExc_IndexError, "the entries do not fit the index file");
        goto done;
    }
    uint8_t *slots = (uint8_t *)buf.buf + INDEX_HEADER_SIZE;
    uint8_t *entries = slots + slot_num * INDEX_SLOT_SIZE;
    for (Py_ssize_t i = 0; i < n; i++, number++) {
        PyObject *item = PyList_GET_ITEM(items, i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(item, 0))) {
            PyErr_SetString(PyExc_TypeError, "items must be (key, phy_offset, store_timestamp) tuples");
            goto done;
        }
        long long phy_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 1));
        long long store_timestamp = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 2));
        if (PyErr_Occurred())
            goto done;
        int32_t key_hash = java_hash_of(PyTuple_GET_ITEM(item, 0));
        key_hash = key_hash == INT32_MIN ? 0 : (key_hash < 0 ? -key_hash : key_hash); /* indexKeyHashMethod */
        uint8_t *slot = slots + (key_hash % slot_num) * INDEX_SLOT_SIZE;
        int64_t prev = (int32_t)get32(slot);
        if (prev <= INVALID_INDEX || prev > number) {
            prev = INVALID_INDEX;
            new_slots++;
        }
        long long time_diff = 0;
        if (begin_timestamp > 0) {
            time_diff = (store_timestamp - begin_timestamp) / 1000;
            time_diff = time_diff < 0 ? 0 : (time_diff > INT32_MAX ? INT32_MAX : time_diff);
        }
        if (number <= 1) {  /* after the time difference, as Java's putKey */
            begin_phy_offset = phy_offset;
            begin_timestamp = store_timestamp;
        }
        uint8_t *entry = entries + number * INDEX_ENTRY_SIZE;
        put32(put32(put64(put32(entry, (uint32_t)key_hash), (uint64_t)phy_offset), (uint32_t)time_diff),
              (uint32_t)prev);
        put32(slot, (uint32_t)number);
    }
    result = Py_BuildValue("(nnLL)", number, new_slots, begin_timestamp, begin_phy_offset);
done:
    PyBuffer_Release(&buf);
    return result;
}

/* -- Dispatch ------------------------------------------------------------------------------------------------------
 * What dispatch reads of each record (record.dispatch_fields plus message.decode_properties), for a run of records
 * at once. */

#define BLANK_MAGIC 0xCBD43194u

/* ValueError(pos, reason): dispatch turns it into CorruptRecord. */
static PyObject *corrupt(Py_ssize_t pos, const char *reason) {
    PyObject *args = Py_BuildValue("(ns)", pos, reason);
    if (args != NULL) {
        PyErr_SetObject(PyExc_ValueError, args);
        Py_DECREF(args);
    }
    return NULL;
}

/* A UnicodeDecodeError as corrupt(): the bytes are not what the CommitLog writes. */
static void not_utf8(Py_ssize_t pos, const char *reason) {
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        corrupt(pos, reason);
    }
}

/* NameCache (the last few property names seen) is declared in _speedups.h: the batch decoder uses it too. */
static PyObject *cached_name(NameCache *cache, const char *p, Py_ssize_t n) {
    for (int i = 0; i < cache->count; i++) {
        PyObject *name = cache->names[i];
        if (PyUnicode_GET_LENGTH(name) == n && PyUnicode_KIND(name) == PyUnicode_1BYTE_KIND &&
            PyUnicode_IS_ASCII(name) && memcmp(PyUnicode_DATA(name), p, (size_t)n) == 0) {
            Py_INCREF(name);
            return name;
        }
    }
    PyObject *name = PyUnicode_DecodeUTF8(p, n, NULL);
    if (name != NULL && cache->count < NAME_CACHE && PyUnicode_IS_ASCII(name)) {
        Py_INCREF(name);
        cache->names[cache->count++] = name;
    }
    return name;
}

/* MessageDecoder.string2messageProperties over the PROPERTIES bytes: name \x01 value \x02 ..., keeping the entries
 * whose name and value are both non-empty. */
PyObject *rmq_decode_properties(const uint8_t *p, Py_ssize_t n, NameCache *names) {
    PyObject *props = PyDict_New();
    PropertyWalk walk = property_walk(p, n);
    Span name_at, value_at;
    while (props != NULL && next_property(&walk, &name_at, &value_at)) {
        PyObject *name = cached_name(names, (const char *)name_at.p, name_at.n);
        PyObject *value = name ? PyUnicode_DecodeUTF8((const char *)value_at.p, value_at.n, NULL) : NULL;
        if (value == NULL || PyDict_SetItem(props, name, value) < 0)
            Py_CLEAR(props);
        Py_XDECREF(name);
        Py_XDECREF(value);
    }
    return props;
}

/* Of the PROPERTIES bytes (checked UTF-8 as a whole), the entries named in ``wanted`` (a tuple of ASCII str): a new
 * dict holding the last value of each, where name and value are both non-empty (string2messageProperties' rules).
 * Dispatch reads three or four properties of a record; a transactional record holds a dozen, and a str per name and
 * value plus a dict entry each cost more than the rest of the scan. */
static PyObject *wanted_properties(const uint8_t *p, Py_ssize_t n, PyObject *wanted) {
    PyObject *props = PyDict_New();
    Py_ssize_t count = PyTuple_GET_SIZE(wanted);
    PropertyWalk walk = property_walk(p, n);
    Span name_at, value_at;
    while (props != NULL && next_property(&walk, &name_at, &value_at)) {
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *name = PyTuple_GET_ITEM(wanted, i);
            if (PyUnicode_GET_LENGTH(name) != name_at.n || memcmp(PyUnicode_DATA(name), name_at.p, (size_t)name_at.n))
                continue;
            PyObject *value = PyUnicode_DecodeUTF8((const char *)value_at.p, value_at.n, NULL);
            if (value == NULL || PyDict_SetItem(props, name, value) < 0)
                Py_CLEAR(props);
            Py_XDECREF(value);
            break;
        }
    }
    return props;
}

PyDoc_STRVAR(scan_records_doc,
"scan_records(buf, pos, limit, max_records, names) -> (records, pos, blank)\n\n"
"The records from ``pos`` up to ``limit`` (at most ``max_records``), each as (TOTALSIZE, QUEUEID, QUEUEOFFSET,\n"
"PHYSICALOFFSET, SYSFLAG, STORETIMESTAMP, topic, properties dict of those named in ``names``, a tuple of ASCII\n"
"str); ``pos`` where the scan stopped, ``blank`` when it stopped at a BLANK filler. A record that runs past\n"
"``limit`` (a slave holds its first bytes only) ends the scan before it. ValueError(pos, reason) when the bytes\n"
"at ``pos`` are not a record (its TOPIC or PROPERTIES not UTF-8 among them).");

static PyObject *scan_records(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, limit, max_records;
    PyObject *wanted;
    if (!PyArg_ParseTuple(args, "y*nnnO!:scan_records", &buf, &pos, &limit, &max_records, &PyTuple_Type, &wanted))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(wanted); i++) {
        PyObject *name = PyTuple_GET_ITEM(wanted, i);
        if (!PyUnicode_Check(name) || !PyUnicode_IS_ASCII(name)) {
            PyBuffer_Release(&buf);
            return PyErr_Format(PyExc_TypeError, "scan_records: names must be ASCII str, not %R", name);
        }
    }
    PyObject *records = PyList_New(0), *result = NULL, *topic = NULL;
    const uint8_t *base = buf.buf, *topic_bytes = NULL;
    Py_ssize_t topic_len = -1;
    int blank = 0;
    if (limit > buf.len)
        limit = buf.len;
    while (records != NULL && pos < limit && PyList_GET_SIZE(records) < max_records) {
        const uint8_t *r = base + pos;
        if (buf.len - pos < 8) {
            corrupt(pos, "not a record: too few bytes");
            goto done;
        }
        if (limit - pos < 8)  /* a record's first bytes, the rest still to come (a slave) */
            break;
        uint32_t size = get32(r + TOTALSIZE_POS), magic = get32(r + MAGICCODE_POS);
        if (magic == BLANK_MAGIC) {
            blank = 1;
            break;
        }
        if (magic != MAGIC_V1 && magic != MAGIC_V2) {
            corrupt(pos, "not a record: bad MAGICCODE");
            goto done;
        }
        if ((Py_ssize_t)size > buf.len - pos) {
            corrupt(pos, "TOTALSIZE runs past the data");
            goto done;
        }
        if ((Py_ssize_t)size > limit - pos)  /* replicated up to here: the master has not sent the rest yet */
            break;
        const uint8_t *rec_end = r + size;
        uint32_t sys_flag = get32(r + SYSFLAG_POS);
        Py_ssize_t born = sys_flag & BORNHOST_V6 ? HOST_V6_LENGTH : HOST_V4_LENGTH;
        Py_ssize_t stored = sys_flag & STOREHOST_V6 ? HOST_V6_LENGTH : HOST_V4_LENGTH;
        if (size < FIXED_WITHOUT_HOSTS + born + stored + 3) {  /* the fixed part, topic length, properties length */
            corrupt(pos, "TOTALSIZE is less than the fixed fields");
            goto done;
        }
        /* STORETIMESTAMP lies between the hosts: only the born host moves it */
        const uint8_t *store_ts = r + STORETIMESTAMP_POS_V4 + host_shift(born, HOST_V4_LENGTH);
        const uint8_t *body_len_at = r + BODY_LENGTH_POS_V4 + host_shift(born, stored);
        const uint8_t *cur = body_len_at + 4 + get32(body_len_at);
        Py_ssize_t tlen;
        if (cur + 2 > rec_end) {
            corrupt(pos, "BODY runs past TOTALSIZE");
            goto done;
        }
        if (magic == MAGIC_V1) {
            tlen = cur[0];
            cur += 1;
        } else {
            tlen = cur[0] << 8 | cur[1];
            cur += 2;
        }
        if (cur + tlen + 2 > rec_end) {
            corrupt(pos, "TOPIC runs past TOTALSIZE");
            goto done;
        }
        if (tlen != topic_len || memcmp(cur, topic_bytes, (size_t)tlen) != 0) {
            Py_XDECREF(topic);
            if ((topic = PyUnicode_DecodeUTF8((const char *)cur, tlen, NULL)) == NULL) {
                not_utf8(pos, "TOPIC is not UTF-8");
                goto done;
            }
            topic_bytes = cur;
            topic_len = tlen;
        }
        cur += tlen;
        Py_ssize_t props_len = cur[0] << 8 | cur[1];
        cur += 2;
        if (props_len >= 0x8000 || cur + props_len > rec_end)
            props_len = 0;  /* as dispatch_fields: a negative length reads as none */
        if (!rmq_is_utf8(cur, props_len)) {
            corrupt(pos, "PROPERTIES are not UTF-8");
            goto done;
        }
        PyObject *props = wanted_properties(cur, props_len, wanted);
        if (props == NULL)
            goto done;
        PyObject *record = Py_BuildValue("(iiLLiLON)", (int)size, (int)(int32_t)get32(r + QUEUEID_POS),
                                         (long long)get64(r + QUEUEOFFSET_POS),
                                         (long long)get64(r + PHYSICALOFFSET_POS), (int)(int32_t)sys_flag,
                                         (long long)get64(store_ts), topic, props);
        if (record == NULL || PyList_Append(records, record) < 0) {
            Py_XDECREF(record);
            goto done;
        }
        Py_DECREF(record);
        pos += size;
    }
    if (records != NULL)
        result = Py_BuildValue("(Onn)", records, pos, (Py_ssize_t)blank);
done:
    Py_XDECREF(records);
    Py_XDECREF(topic);
    PyBuffer_Release(&buf);
    return result;
}

/* -- Recovery --------------------------------------------------------------------------------------------------------
 * record.check_record, one record after another: how far the data from a position is whole and intact. */

int rmq_is_utf8(const uint8_t *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, 8);
        if (word & 0x8080808080808080ULL)
            break;
    }
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

/* TOTALSIZE of a whole, intact record at ``r`` with ``room`` bytes left, else 0. */
static Py_ssize_t intact_record(const uint8_t *r, Py_ssize_t room) {
    int32_t size = (int32_t)get32(r + TOTALSIZE_POS);
    uint32_t magic = get32(r + MAGICCODE_POS);
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || size < FIXED_SIZE_V4 || size > room)
        return 0;
    uint32_t sys_flag = get32(r + SYSFLAG_POS);
    Py_ssize_t shift = host_shift(sys_flag & BORNHOST_V6 ? HOST_V6_LENGTH : HOST_V4_LENGTH,
                                  sys_flag & STOREHOST_V6 ? HOST_V6_LENGTH : HOST_V4_LENGTH);
    Py_ssize_t fixed = FIXED_SIZE_V4 + shift;
    Py_ssize_t topic_size = magic == MAGIC_V1 ? 1 : 2;
    if (size < fixed + topic_size + 2)
        return 0;
    const uint8_t *end = r + size, *body = r + fixed;
    int32_t body_len = (int32_t)get32(r + BODY_LENGTH_POS_V4 + shift);
    if (body_len < 0 || body_len > end - body - topic_size - 2)
        return 0;
    const uint8_t *cur = body + body_len;
    Py_ssize_t topic_len = topic_size == 1 ? (int8_t)cur[0] : (int16_t)(cur[0] << 8 | cur[1]);
    cur += topic_size;
    if (topic_len < 0 || topic_len > end - cur - 2 || !rmq_is_utf8(cur, topic_len))
        return 0;
    cur += topic_len;
    Py_ssize_t props_len = (int16_t)(cur[0] << 8 | cur[1]);
    cur += 2;
    if (props_len > 0) {
        if (props_len > end - cur || !rmq_is_utf8(cur, props_len))
            return 0;
        cur += props_len;
    }
    if (cur != end || (rmq_crc32(0, body, (size_t)body_len) & 0x7FFFFFFFu) != get32(r + BODYCRC_POS))
        return 0;
    return size;
}

PyDoc_STRVAR(check_records_doc,
"check_records(buf, pos, limit) -> (pos, blank)\n\n"
"Walk the records of ``buf[pos:limit]`` while each is whole with a correct body CRC; where that stopped, and\n"
"whether it stopped after a BLANK filler that ends ``limit``.");

static PyObject *check_records(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, limit, size;
    if (!PyArg_ParseTuple(args, "y*nn:check_records", &buf, &pos, &limit))
        return NULL;
    const uint8_t *base = buf.buf;
    int blank = 0;
    if (limit > buf.len)
        limit = buf.len;
    while (pos >= 0 && limit - pos >= 8) {
        if (get32(base + pos + MAGICCODE_POS) == BLANK_MAGIC) {
            if ((int32_t)get32(base + pos + TOTALSIZE_POS) == limit - pos) {
                pos = limit;
                blank = 1;
            }
            break;
        }
        if ((size = intact_record(base + pos, limit - pos)) == 0)
            break;
        pos += size;
    }
    PyBuffer_Release(&buf);
    return Py_BuildValue("(nO)", pos, blank ? Py_True : Py_False);
}

typedef struct {
    PyObject *topic;      /* str */
    PyObject *queue_id;   /* int, the object itself: part of the (topic, queueId) key */
    PyObject *born_host;  /* bytes, 8 or 20 */
    PyObject *props;      /* bytes: the PROPERTIES field */
    Py_buffer body;
    Py_buffer encoded;    /* a record encoded ahead (bytes or bytearray), else .obj is NULL */
    Py_ssize_t born_len;
    const char *topic_utf8;
    Py_ssize_t topic_len;
    int32_t queue_id_value, flag, sys_flag, reconsume_times;
    int64_t born_timestamp, prepared_offset, queue_offset;
    Py_ssize_t size;
} Item;

static PyObject *s_topic, *s_queue_id, *s_body, *s_properties, *s_encoded_properties, *s_flag, *s_sys_flag,
    *s_born_timestamp, *s_born_host, *s_reconsume_times, *s_prepared_transaction_offset;

/* ValueError(status, reason): commit_log turns it into an EncodeError with that PutMessageStatus. */
static void refuse(const char *status, PyObject *reason) {
    if (reason != NULL) {
        PyObject *args = Py_BuildValue("(sO)", status, reason);
        if (args != NULL) {
            PyErr_SetObject(PyExc_ValueError, args);
            Py_DECREF(args);
        }
        Py_DECREF(reason);
    }
}

static int read_long(PyObject *msg, PyObject *name, int64_t *out) {
    PyObject *value = PyObject_GetAttr(msg, name);
    if (value == NULL)
        return -1;
    *out = PyLong_AsLongLong(value);
    Py_DECREF(value);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int to_int(PyObject *value, PyObject *name, int32_t *out) {
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (v < INT32_MIN || v > INT32_MAX) {
        PyErr_Format(PyExc_OverflowError, "%U %lld does not fit an int", name, v);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

static int read_int(PyObject *msg, PyObject *name, int32_t *out) {
    PyObject *value = PyObject_GetAttr(msg, name);
    if (value == NULL)
        return -1;
    int failed = to_int(value, name, out);
    Py_DECREF(value);
    return failed;
}

/* A record encoded ahead (transaction/batch.py's prepared batches): its own bytes, of which the put writes only the
 * queue offset, physical offset, store timestamp and store host. The (topic, queueId) key is made from its fields,
 * reusing the previous item's objects when they are the same (a run of one queue's records). */
static int read_encoded(Item *it, const Item *previous, PyObject *msg, Py_ssize_t store_host_len) {
    if (PyObject_GetBuffer(msg, &it->encoded, PyBUF_SIMPLE) < 0)
        return -1;
    const uint8_t *r = it->encoded.buf;
    Py_ssize_t n = it->encoded.len;
    if (n < FIXED_SIZE_V4 || (Py_ssize_t)get32(r + TOTALSIZE_POS) != n)
        goto malformed;
    uint32_t magic = get32(r + MAGICCODE_POS);
    it->sys_flag = (int32_t)get32(r + SYSFLAG_POS);
    it->born_len = it->sys_flag & BORNHOST_V6 ? HOST_V6_LENGTH : HOST_V4_LENGTH;
    Py_ssize_t stored_len = it->sys_flag & STOREHOST_V6 ? HOST_V6_LENGTH : HOST_V4_LENGTH;
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || stored_len != store_host_len)
        goto malformed;
    Py_ssize_t cur = BODY_LENGTH_POS_V4 + host_shift(it->born_len, stored_len);
    int32_t body_len = (int32_t)get32(r + cur);
    cur += 4;
    if (body_len < 0 || body_len > n - cur - 2)
        goto malformed;
    cur += body_len;
    Py_ssize_t topic_len = r[cur];
    cur += 1;
    if (magic == MAGIC_V2) {
        topic_len = (Py_ssize_t)((uint16_t)(topic_len << 8 | r[cur]));
        cur += 1;
    }
    if (topic_len > n - cur - 2 || cur + topic_len + 2 + (r[cur + topic_len] << 8 | r[cur + topic_len + 1]) != n)
        goto malformed;
    it->topic_utf8 = (const char *)r + cur;
    it->topic_len = topic_len;
    it->queue_id_value = (int32_t)get32(r + QUEUEID_POS);
    it->size = n;
    if (previous != NULL && previous->topic != NULL && previous->topic_len == topic_len &&
        previous->queue_id_value == it->queue_id_value &&
        memcmp(previous->topic_utf8, it->topic_utf8, (size_t)topic_len) == 0) {
        it->topic = Py_NewRef(previous->topic);
        it->queue_id = Py_NewRef(previous->queue_id);
        return 0;
    }
    if ((it->topic = PyUnicode_DecodeUTF8(it->topic_utf8, topic_len, NULL)) == NULL)
        return -1;
    it->queue_id = PyLong_FromLong(it->queue_id_value);
    return it->queue_id == NULL ? -1 : 0;
malformed:
    PyErr_SetString(PyExc_TypeError, "a record encoded ahead is malformed (or was encoded for another store host)");
    return -1;
}

/* Fills ``it`` from ``msg``; -1 with an exception set when the message cannot be stored. */
static int read_item(Item *it, PyObject *msg, PyObject *encode_properties, Py_ssize_t max_body) {
    if ((it->topic = PyObject_GetAttr(msg, s_topic)) == NULL)
        return -1;
    if ((it->topic_utf8 = PyUnicode_AsUTF8AndSize(it->topic, &it->topic_len)) == NULL)
        return -1;
    if ((it->queue_id = PyObject_GetAttr(msg, s_queue_id)) == NULL)
        return -1;
    if (to_int(it->queue_id, s_queue_id, &it->queue_id_value) < 0 || read_int(msg, s_flag, &it->flag) < 0 ||
        read_int(msg, s_sys_flag, &it->sys_flag) < 0 || read_int(msg, s_reconsume_times, &it->reconsume_times) < 0 ||
        read_long(msg, s_born_timestamp, &it->born_timestamp) < 0 ||
        read_long(msg, s_prepared_transaction_offset, &it->prepared_offset) < 0)
        return -1;
    PyObject *body = PyObject_GetAttr(msg, s_body);
    if (body == NULL)
        return -1;
    int got = PyObject_GetBuffer(body, &it->body, PyBUF_SIMPLE);
    Py_DECREF(body);
    if (got < 0)
        return -1;
    if (it->body.len > max_body) {
        refuse("MESSAGE_ILLEGAL", PyUnicode_FromFormat("message body is %zd bytes, maxMessageSize is %zd",
                                                       it->body.len, max_body));
        return -1;
    }
    if ((it->born_host = PyObject_GetAttr(msg, s_born_host)) == NULL)
        return -1;
    if (!PyBytes_Check(it->born_host) || (PyBytes_GET_SIZE(it->born_host) != HOST_V4_LENGTH &&
                                          PyBytes_GET_SIZE(it->born_host) != HOST_V6_LENGTH)) {
        refuse("MESSAGE_ILLEGAL", PyUnicode_FromString("born host must be 8 (IPv4) or 20 (IPv6) packed bytes"));
        return -1;
    }
    if ((it->props = PyObject_GetAttr(msg, s_encoded_properties)) == NULL)
        return -1;
    if (it->props == Py_None) {
        Py_DECREF(it->props);
        PyObject *properties = PyObject_GetAttr(msg, s_properties);
        if (properties == NULL)
            return -1;
        it->props = PyObject_CallOneArg(encode_properties, properties);
        Py_DECREF(properties);
        if (it->props == NULL)
            return -1;
    }
    if (!PyBytes_Check(it->props)) {
        PyErr_SetString(PyExc_TypeError, "properties must be encoded as bytes");
        return -1;
    }
    if (PyBytes_GET_SIZE(it->props) > MAX_PROPERTIES_LENGTH) {
        refuse("PROPERTIES_SIZE_EXCEEDED", PyUnicode_FromFormat("properties are %zd bytes, at most %d are allowed",
                                                                PyBytes_GET_SIZE(it->props), MAX_PROPERTIES_LENGTH));
        return -1;
    }
    if (it->topic_len > TOPIC_V2_MAX) {
        refuse("MESSAGE_ILLEGAL", PyUnicode_FromFormat("topic is %zd bytes, at most %d fit", it->topic_len,
                                                       TOPIC_V2_MAX));
        return -1;
    }
    return 0;
}

/* The queue offset ``it`` takes: the next of its (topic, queueId), counted on in ``pending`` (the caller commits
 * those to ``next_offsets`` once the put has landed). Prepared and rolled-back records never enter a ConsumeQueue. */
static int assign_queue_offset(Item *it, PyObject *pending, PyObject *next_offsets) {
    int tx = it->sys_flag & TX_MASK;
    if (tx == TX_PREPARED || tx == TX_ROLLBACK) {
        it->queue_offset = 0;
        return 0;
    }
    PyObject *key = PyTuple_Pack(2, it->topic, it->queue_id);
    if (key == NULL)
        return -1;
    PyObject *current = PyDict_GetItemWithError(pending, key);
    if (current == NULL && !PyErr_Occurred())
        current = PyDict_GetItemWithError(next_offsets, key);
    if (current == NULL && PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    it->queue_offset = current == NULL ? 0 : PyLong_AsLongLong(current);
    if (it->queue_offset == -1 && PyErr_Occurred()) {
        Py_DECREF(key);
        return -1;
    }
    PyObject *next = PyLong_FromLongLong(it->queue_offset + 1);
    int failed = next == NULL || PyDict_SetItem(pending, key, next) < 0;
    Py_XDECREF(next);
    Py_DECREF(key);
    return failed ? -1 : 0;
}

static uint8_t *write_record(uint8_t *p, const Item *it, int64_t physical_offset, int64_t store_timestamp,
                             const char *store_host, Py_ssize_t store_host_len) {
    if (it->encoded.obj != NULL) {
        memcpy(p, it->encoded.buf, (size_t)it->size);
        put64(p + QUEUEOFFSET_POS, (uint64_t)it->queue_offset);
        put64(p + PHYSICALOFFSET_POS, (uint64_t)physical_offset);
        uint8_t *stored = p + STORETIMESTAMP_POS_V4 + it->born_len - HOST_V4_LENGTH;
        put_bytes(put64(stored, (uint64_t)store_timestamp), store_host, store_host_len);
        return p + it->size;
    }
    int v1 = it->topic_len <= TOPIC_V1_MAX;
    Py_ssize_t born_len = PyBytes_GET_SIZE(it->born_host), props_len = PyBytes_GET_SIZE(it->props);
    uint32_t crc = rmq_crc32(0, it->body.buf, (size_t)it->body.len);
    p = put32(p, (uint32_t)it->size);
    p = put32(p, v1 ? MAGIC_V1 : MAGIC_V2);
    p = put32(p, (uint32_t)(crc & 0x7FFFFFFFu));
    p = put32(p, (uint32_t)it->queue_id_value);
    p = put32(p, (uint32_t)it->flag);
    p = put64(p, (uint64_t)it->queue_offset);
    p = put64(p, (uint64_t)physical_offset);
    p = put32(p, (uint32_t)it->sys_flag);
    p = put64(p, (uint64_t)it->born_timestamp);
    p = put_bytes(p, PyBytes_AS_STRING(it->born_host), born_len);
    p = put64(p, (uint64_t)store_timestamp);
    p = put_bytes(p, store_host, store_host_len);
    p = put32(p, (uint32_t)it->reconsume_times);
    p = put64(p, (uint64_t)it->prepared_offset);
    p = put32(p, (uint32_t)it->body.len);
    p = put_bytes(p, it->body.buf, it->body.len);
    if (v1) {
        *p++ = (uint8_t)it->topic_len;
    } else {
        *p++ = (uint8_t)(it->topic_len >> 8);
        *p++ = (uint8_t)it->topic_len;
    }
    p = put_bytes(p, it->topic_utf8, it->topic_len);
    *p++ = (uint8_t)(props_len >> 8);
    *p++ = (uint8_t)props_len;
    return put_bytes(p, PyBytes_AS_STRING(it->props), props_len);
}

static void release_items(Item *items, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        Item *it = &items[i];
        Py_XDECREF(it->topic);
        Py_XDECREF(it->queue_id);
        Py_XDECREF(it->born_host);
        Py_XDECREF(it->props);
        if (it->body.obj != NULL)
            PyBuffer_Release(&it->body);
        if (it->encoded.obj != NULL)
            PyBuffer_Release(&it->encoded);
    }
    PyMem_Free(items);
}

PyDoc_STRVAR(pack_records_doc,
"pack_records(buf, pos, room, base, msgs, store_timestamp, store_host, max_body, max_record, next_offsets,\n"
"             encode_properties) -> (total, queue_offsets, record_offsets, pending)\n\n"
"Write the records of ``msgs`` into ``buf`` at ``pos`` when their ``total`` size is at most ``room``, else\n"
"write nothing and return (total, None, None, None). ``base`` is the physical offset of ``pos``.");

static PyObject *pack_records(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer buf;
    Py_ssize_t pos, room, max_body, max_record;
    long long base, store_timestamp;
    PyObject *msgs, *next_offsets, *encode_properties;
    const char *store_host;
    Py_ssize_t store_host_len;
    if (!PyArg_ParseTuple(args, "w*nnLO!Ly#nnO!O:pack_records", &buf, &pos, &room, &base, &PyList_Type, &msgs,
                          &store_timestamp, &store_host, &store_host_len, &max_body, &max_record, &PyDict_Type,
                          &next_offsets, &encode_properties))
        return NULL;
    PyObject *result = NULL, *pending = NULL, *queue_offsets = NULL, *record_offsets = NULL;
    msgs = PyList_AsTuple(msgs);  /* a snapshot: encode_properties is Python, and could change the list */
    Py_ssize_t n = msgs ? PyTuple_GET_SIZE(msgs) : 0, total = 0;
    Item *items = msgs ? PyMem_Calloc(n ? (size_t)n : 1, sizeof(Item)) : NULL;
    if (items == NULL) {
        if (msgs != NULL)
            PyErr_NoMemory();
        goto done;
    }
    if (store_host_len != HOST_V4_LENGTH && store_host_len != HOST_V6_LENGTH) {
        PyErr_SetString(PyExc_TypeError, "store host must be 8 (IPv4) or 20 (IPv6) packed bytes");
        goto done;
    }
    if (pos < 0 || room < 0 || pos + room > buf.len) {
        PyErr_SetString(PyExc_IndexError, "pos and room run past the buffer");
        goto done;
    }
    int32_t host_bits = store_host_len == HOST_V6_LENGTH ? STOREHOST_V6 : 0;
    if ((pending = PyDict_New()) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        Item *it = &items[i];
        PyObject *msg = PyTuple_GET_ITEM(msgs, i);
        if (PyBytes_Check(msg) || PyByteArray_Check(msg)) {
            if (read_encoded(it, i > 0 ? &items[i - 1] : NULL, msg, store_host_len) < 0)
                goto done;
        } else {
            if (read_item(it, msg, encode_properties, max_body) < 0)
                goto done;
            Py_ssize_t born_len = PyBytes_GET_SIZE(it->born_host);
            it->sys_flag = (it->sys_flag & ~(BORNHOST_V6 | STOREHOST_V6)) | host_bits |
                           (born_len == HOST_V6_LENGTH ? BORNHOST_V6 : 0);
            it->size = FIXED_WITHOUT_HOSTS + born_len + store_host_len + it->body.len +
                       (it->topic_len <= TOPIC_V1_MAX ? 1 : 2) + it->topic_len + 2 + PyBytes_GET_SIZE(it->props);
        }
        if (it->size > max_record) {
            refuse("MESSAGE_ILLEGAL", PyUnicode_FromFormat("message is %zd bytes stored, at most %zd fit", it->size,
                                                           max_record));
            goto done;
        }
        if (assign_queue_offset(it, pending, next_offsets) < 0)
            goto done;
        total += it->size;
    }
    if (total > room) {
        result = Py_BuildValue("(nOOO)", total, Py_None, Py_None, Py_None);
        goto done;
    }
    if ((queue_offsets = PyList_New(n)) == NULL || (record_offsets = PyList_New(n)) == NULL)
        goto done;
    int64_t offset = base;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *q = PyLong_FromLongLong(items[i].queue_offset), *r = PyLong_FromLongLong(offset);
        if (q == NULL || r == NULL) {
            Py_XDECREF(q);
            Py_XDECREF(r);
            goto done;
        }
        PyList_SET_ITEM(queue_offsets, i, q);
        PyList_SET_ITEM(record_offsets, i, r);
        offset += items[i].size;
    }
    Py_BEGIN_ALLOW_THREADS
    uint8_t *p = (uint8_t *)buf.buf + pos;
    offset = base;
    for (Py_ssize_t i = 0; i < n; i++) {
        p = write_record(p, &items[i], offset, store_timestamp, store_host, store_host_len);
        offset += items[i].size;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(nOOO)", total, queue_offsets, record_offsets, pending);
done:
    Py_XDECREF(queue_offsets);
    Py_XDECREF(record_offsets);
    Py_XDECREF(pending);
    Py_XDECREF(msgs);
    if (items != NULL)
        release_items(items, n);
    PyBuffer_Release(&buf);
    return result;
}

extern PyMethodDef rmq_remoting_methods[];  /* broker/_speedups_remoting.c */
extern PyMethodDef rmq_batch_methods[];     /* broker/_speedups_batch.c */
extern PyMethodDef rmq_pull_methods[];      /* broker/_speedups_pull.c */
extern PyMethodDef rmq_read_methods[];      /* broker/_speedups_read.c */
extern PyMethodDef rmq_send_methods[];      /* broker/_speedups_send.c */

static PyMethodDef methods[] = {
    {"pack_records", pack_records, METH_VARARGS, pack_records_doc},
    {"crc32", crc32_py, METH_VARARGS, crc32_doc},
    {"java_hash", java_hash_py, METH_O, java_hash_doc},
    {"put_index_entries", put_index_entries, METH_VARARGS, put_index_entries_doc},
    {"scan_records", scan_records, METH_VARARGS, scan_records_doc},
    {"check_records", check_records, METH_VARARGS, check_records_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "broker._speedups", "The store's per-message loops in C (see the source's head).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_topic, "topic"}, {&s_queue_id, "queue_id"}, {&s_body, "body"}, {&s_properties, "properties"},
        {&s_encoded_properties, "encoded_properties"}, {&s_flag, "flag"}, {&s_sys_flag, "sys_flag"},
        {&s_born_timestamp, "born_timestamp"}, {&s_born_host, "born_host"}, {&s_reconsume_times, "reconsume_times"},
        {&s_prepared_transaction_offset, "prepared_transaction_offset"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (*names[i].slot == NULL && (*names[i].slot = PyUnicode_InternFromString(names[i].name)) == NULL)
            return NULL;
    }
    detect_cpu();
    PyObject *module = PyModule_Create(&module_def);
    if (module != NULL && (PyModule_AddFunctions(module, rmq_remoting_methods) < 0 ||
                           PyModule_AddFunctions(module, rmq_batch_methods) < 0 ||
                           PyModule_AddFunctions(module, rmq_pull_methods) < 0 ||
                           PyModule_AddFunctions(module, rmq_read_methods) < 0 ||
                           PyModule_AddFunctions(module, rmq_send_methods) < 0))
        Py_CLEAR(module);
    return module;
}
