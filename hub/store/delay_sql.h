/* delay_sql.h: SQL pieces of delayed delivery (docs/consumers.md: Delayed delivery, issue 23 §1),
 * shared by the batch (store.c), the check-backs (store.c) and the operators'
 * resolve (ops_write.c), so that each commit computes the due time alike.
 *
 * A prepare's forward.not_before is stored in not_before at once (the due time
 * it names). Its forward.delay_ms counts from the commit, which is not known
 * yet: until then it is kept in the row's next_send_at (which means nothing
 * before a commit) as that much time after the epoch (1970-01-01). When the
 * commit is applied, not_before becomes the due time (not_before, or the
 * commit's time plus the delay); a due time still ahead makes the committed
 * row wait as a retry does: send_status 'pending', fwd_seq NULL, next_send_at
 * = not_before, on messages_send_retry, so that the due scans read only what
 * is due, and no delivery mark covers it (it has no sequence) until it is
 * sent. */
#ifndef TXHUB_DELAY_SQL_H
#define TXHUB_DELAY_SQL_H

/* A time ms (SQL bigint expression, milliseconds) after the epoch. */
#define SQL_AFTER_EPOCH(ms) "('epoch'::timestamptz + " ms " * interval '1 millisecond')"

/* The due time of row alias r (prefix "m." or "") committed now, from what
 * it stores (NULL: not delayed). */
#define SQL_DUE_STORED(r) \
	"coalesce(" r "not_before, now() + (" r "next_send_at - 'epoch'::timestamptz))"

/* The columns a commit applied outside the control topic (a check-back's
 * answer, an operator's resolve) writes, when committed (SQL boolean) holds:
 * the due time in not_before, and next_send_at = the due time or now. */
#define SQL_COMMIT_DUE(r, committed)                                                 \
	"not_before = CASE WHEN " committed " THEN " SQL_DUE_STORED(r) " ELSE " r           \
	"not_before END, next_send_at = CASE WHEN " committed " THEN greatest(now(), "     \
	SQL_DUE_STORED(r) ") ELSE " r "next_send_at END"

#endif
