/*
 * What the parts of broker._speedups share (broker/_speedups.c defines these; the other parts use them).
 */
#ifndef RMQ_SPEEDUPS_H
#define RMQ_SPEEDUPS_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

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

/* The CommitLog record's layout and the big-endian access every RocketMQ format needs (both parts of the module
 * write records). */
/* Big-endian loads and stores, as every RocketMQ format is. */
static inline uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t get64(const uint8_t *p) {
    return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static inline uint8_t *put32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
    return p + 4;
}

static inline uint8_t *put64(uint8_t *p, uint64_t v) {
    return put32(put32(p, (uint32_t)(v >> 32)), (uint32_t)v);
}

static inline uint8_t *put_bytes(uint8_t *p, const void *src, Py_ssize_t n) {
    memcpy(p, src, (size_t)n);
    return p + n;
}

#define MAGIC_V1 0xDAA320A7u          /* topic length in 1 byte */
#define MAGIC_V2 0xDAA320ABu          /* topic length in 2 bytes */
#define TOPIC_V1_MAX 127              /* longest topic a V1 record holds (a signed byte) */
#define TOPIC_V2_MAX 32767
#define TX_MASK 0xC
#define TX_PREPARED 0x4
#define TX_COMMIT 0x8
#define TX_ROLLBACK 0xC
#define BORNHOST_V6 0x10
#define STOREHOST_V6 0x20
#define COMPRESSED 0x1                /* sysFlag: the body is zlib-compressed */
#define MAX_PROPERTIES_LENGTH 32767

/* The CommitLog record's fixed part (record.py's field table). Fields up to BORNHOST sit at the same offset in every
 * record; the ones after a host move with its length, so theirs are given for a record with two IPv4 hosts (_V4). */
#define TOTALSIZE_POS 0
#define MAGICCODE_POS 4
#define BODYCRC_POS 8
#define QUEUEID_POS 12
#define QUEUEOFFSET_POS 20
#define PHYSICALOFFSET_POS 28
#define SYSFLAG_POS 36
#define BORNTIMESTAMP_POS 40
#define BORNHOST_POS 48
#define STORETIMESTAMP_POS_V4 56
#define STOREHOST_POS_V4 64
#define RECONSUMETIMES_POS_V4 72
#define PREPARED_OFFSET_POS_V4 76
#define BODY_LENGTH_POS_V4 84
#define FIXED_SIZE_V4 88              /* TOTALSIZE .. BODY length */
#define HOST_V4_LENGTH 8              /* ip + int port */
#define HOST_V6_LENGTH 20
/* The fixed part without its two hosts: TOTALSIZE .. BODY length, 13 ints and longs. */
#define FIXED_WITHOUT_HOSTS 72

/* How far the fields after the hosts move from their _V4 offsets in a record with these host lengths. */
static inline Py_ssize_t host_shift(Py_ssize_t born_len, Py_ssize_t store_len) {
    return born_len - HOST_V4_LENGTH + store_len - HOST_V4_LENGTH;
}

/* A run of bytes inside a buffer the caller holds. */
typedef struct {
    const uint8_t *p;
    Py_ssize_t n;
} Span;

static inline int span_equals(Span s, const char *text) {
    size_t n = strlen(text);
    return (size_t)s.n == n && memcmp(s.p, text, n) == 0;
}

/* MessageDecoder.string2messageProperties' walk over PROPERTIES bytes (name \x01 value \x02 ...): the entries whose
 * name and value are both non-empty, in order (a name met twice comes twice: Java's map keeps the last value). The
 * store's dispatch, the send's record, the pull's columns and the properties dict all read them this one way:
 *
 *     PropertyWalk walk = property_walk(p, n);
 *     Span name, value;
 *     while (next_property(&walk, &name, &value)) ...
 */
typedef struct {
    const uint8_t *p, *end;
} PropertyWalk;

static inline PropertyWalk property_walk(const uint8_t *p, Py_ssize_t n) {
    return (PropertyWalk){p, p + n};
}

/* The next entry kept into *name and *value: 1, or 0 at the end. */
static inline int next_property(PropertyWalk *walk, Span *name, Span *value) {
    while (walk->p < walk->end) {
        const uint8_t *item = walk->p;
        const uint8_t *item_end = memchr(item, 0x02, (size_t)(walk->end - item));
        if (item_end == NULL)
            item_end = walk->end;
        walk->p = item_end + 1;
        const uint8_t *sep = memchr(item, 0x01, (size_t)(item_end - item));
        if (sep != NULL && sep > item && sep + 1 < item_end) {
            *name = (Span){item, sep - item};
            *value = (Span){sep + 1, item_end - sep - 1};
            return 1;
        }
    }
    return 0;
}

/* A record's SYSFLAG as a put writes it: the message's, with the host bits set by the hosts' lengths. */
static inline int32_t stored_sys_flag(int32_t sys_flag, Span born_host, Span store_host) {
    return (sys_flag & ~(BORNHOST_V6 | STOREHOST_V6)) | (born_host.n == HOST_V6_LENGTH ? BORNHOST_V6 : 0) |
           (store_host.n == HOST_V6_LENGTH ? STOREHOST_V6 : 0);
}

/* The size of a whole record of these parts. */
static inline Py_ssize_t encoded_size(Span topic, Span born_host, Span store_host, Span body, Py_ssize_t props_len) {
    return FIXED_WITHOUT_HOSTS + born_host.n + store_host.n + body.n + (topic.n <= TOPIC_V1_MAX ? 1 : 2) + topic.n +
           2 + props_len;
}

/* One whole record with its put's fields zero (queue offset, physical offset, store timestamp, prepared transaction
 * offset): a record encoded ahead, which the put stamps. ``props`` is the concatenation of ``nprops`` spans. */
static inline uint8_t *write_encoded(uint8_t *p, Py_ssize_t size, Span topic, int32_t queue_id, int32_t flag,
                                     uint32_t crc, int32_t sys_flag, int64_t born_timestamp, Span born_host,
                                     Span store_host, int32_t reconsume_times, Span body, const Span *props,
                                     int nprops) {
    int v1 = topic.n <= TOPIC_V1_MAX;
    Py_ssize_t props_len = 0;
    for (int i = 0; i < nprops; i++)
        props_len += props[i].n;
    p = put32(p, (uint32_t)size);
    p = put32(p, v1 ? MAGIC_V1 : MAGIC_V2);
    p = put32(p, crc);
    p = put32(p, (uint32_t)queue_id);
    p = put32(p, (uint32_t)flag);
    p = put64(p, 0);  /* QUEUEOFFSET */
    p = put64(p, 0);  /* PHYSICALOFFSET */
    p = put32(p, (uint32_t)sys_flag);
    p = put64(p, (uint64_t)born_timestamp);
    p = put_bytes(p, born_host.p, born_host.n);
    p = put64(p, 0);  /* STORETIMESTAMP */
    p = put_bytes(p, store_host.p, store_host.n);
    p = put32(p, (uint32_t)reconsume_times);
    p = put64(p, 0);  /* PREPAREDTRANSACTIONOFFSET */
    p = put32(p, (uint32_t)body.n);
    p = put_bytes(p, body.p, body.n);
    if (!v1)
        *p++ = (uint8_t)(topic.n >> 8);
    *p++ = (uint8_t)topic.n;
    p = put_bytes(p, topic.p, topic.n);
    *p++ = (uint8_t)(props_len >> 8);
    *p++ = (uint8_t)props_len;
    for (int i = 0; i < nprops; i++)
        p = put_bytes(p, props[i].p, props[i].n);
    return p;
}

/* 1 when the run is UTF-8 as Python's strict decoder (and Arrow's validation) reads it, else 0. ASCII, nearly
 * every topic and PROPERTIES field, is checked eight bytes a step without making a str. */
int rmq_is_utf8(const uint8_t *p, Py_ssize_t n);

/* zlib.crc32(data, crc), folded with carry-less multiplication where the CPU has it. */
uint32_t rmq_crc32(uint32_t crc, const uint8_t *p, size_t len);

#endif
