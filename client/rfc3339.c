/* rfc3339.c: the hub's RFC 3339 parser (hub/lib/rfc3339.c, unit-tested there),
 * compiled into the client library under internal names, so that a
 * producer's forward_not_before is checked by the very code the hub reads it
 * with, and libtxhub.a clashes with nothing (the hub links both). */
#define rfc3339_parse txhubi_rfc3339_parse
#define rfc3339_format txhubi_rfc3339_format
#include "../hub/lib/rfc3339.c"
