/*
 * What the parts of broker._speedups share (broker/_speedups.c defines these; _speedups_batch.c and
 * _speedups_pull.c use them).
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

/* 1 when the run is UTF-8 as Python's strict decoder (and Arrow's validation) reads it, else 0. ASCII, nearly
 * every topic and PROPERTIES field, is checked eight bytes a step without making a str. */
int rmq_is_utf8(const uint8_t *p, Py_ssize_t n);

/* zlib.crc32(data, crc), folded with carry-less multiplication where the CPU has it. */
uint32_t rmq_crc32(uint32_t crc, const uint8_t *p, size_t len);

#endif
