/* utf8.h: UTF-8 as RFC 3629 has it: one decoder for the hub and the client
 * library (meson.build compiles utf8.c into libtxhub, which the hub links).
 *
 * A sequence is valid when it is the shortest form of a code point up to
 * U+10FFFF that is no UTF-16 surrogate: overlong forms, surrogates, bytes
 * that cannot start a sequence and sequences cut short are invalid.
 * Pure logic, no I/O, no state: any thread may call these. */
#ifndef TXHUB_UTF8_H
#define TXHUB_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The length (1 to 4) of the valid sequence at s, with n >= 1 bytes there,
 * and its code point in *cp; 0 when the bytes there are not one (*cp then
 * untouched). */
size_t txhubi_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

/* 1 when s[0..n) is valid UTF-8 throughout (NUL bytes included, as U+0000),
 * else 0. s may be NULL when n is 0. */
int txhubi_utf8_valid(const void *s, size_t n);

/* The length of p[0..n) without a sequence cut short at its end (a text
 * cut at a byte count), so that what is left can still be valid; n when
 * the end is not inside a sequence. Looks at the last bytes only. */
size_t txhubi_utf8_complete(const unsigned char *p, size_t n);

#endif
