/* topic_name.c: see topic_name.h. */
#include "topic_name.h"

int txhubi_topic_valid(const char *s, size_t len)
{
	if (len == 0 || len > TOPIC_NAME_MAX)
		return 0;
	if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}
