/* vectors.h: read the files of tests/vectors for the C tests (the client
 * library's and the hub's). */
#ifndef TXHUB_TEST_VECTORS_H
#define TXHUB_TEST_VECTORS_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "txhub.h"

/* The parsed file tests/vectors/<name>; the caller cJSON_Delete()s it. */
cJSON *v_load(const char *name);

/* Standard base64 to malloc'd bytes (NUL-terminated for convenience). */
unsigned char *v_unbase64(const char *s, size_t *len);

/* A vector's "type" and "input" as the library's arguments. Strings given
 * as *_base64 (bytes that are not valid UTF-8) are decoded. Owns its
 * storage; v_input_free() releases it. */
typedef struct {
	txhub_type type;
	txhub_message m;
	size_t max_bytes;
	char *biz_id, *message_key, *forward_key;
	unsigned char *payload;
	txhub_header headers[80];
	size_t nheaders;
} v_input;

void v_input_from(const cJSON *vector, v_input *in);
void v_input_free(v_input *in);

#endif
