/* console_assets.h: the web console's script, style sheet and icon,
 * compiled into the binary from console/ by tools/embed_assets.py (the
 * build generates console_assets.c). Read-only data: any thread. */
#ifndef TXHUB_CONSOLE_ASSETS_H
#define TXHUB_CONSOLE_ASSETS_H

#include <stddef.h>

typedef struct {
	const char *path; /* "/static/app.js" */
	const char *type; /* its Content-Type */
	const unsigned char *data;
	size_t len;
} console_asset;

/* The files, ended by a row whose path is NULL. */
extern const console_asset console_assets[];

/* The file served at path, or NULL. */
const console_asset *console_asset_find(const char *path);

#endif
