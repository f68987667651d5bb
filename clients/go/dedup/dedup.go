// Package dedup processes each forwarded record once, downstream: txhub
// delivers at least once, and the record's txhub-biz-id and
// txhub-message-key headers identify the message. The same table and rules
// as the C library's txhub/dedup.h and the Python package's txhub.dedup,
// on database/sql with pgx (this package registers pgx's "pgx" driver:
// sql.Open("pgx", dsn)).
//
// The consumer keeps a table in its own PostgreSQL database (TableSQL, or
// CreateTable) and claims each record before acting on it, one of two ways:
//
// In the caller's transaction (ClaimTx: the business write goes through
// the same *sql.Tx). The claim writes the row as 'processed' at once,
// inside that transaction: it becomes visible only when the caller
// commits, together with the business write, and vanishes if the caller
// rolls back. A concurrent claim of the same message waits on the row lock
// until the first transaction ends, then sees Duplicate (it committed) or
// claims it (it rolled back). A holder that dies is rolled back by
// PostgreSQL, so nothing needs to expire.
//
// In its own transactions (Claim on a *sql.DB: the business write goes
// elsewhere). The claim commits a 'processing' row with a random holder
// token and expires_at = now + lease; other claims see Busy until it
// expires and take it over after that. Done marks it 'processed'
// (ErrClaimLost if it was taken over meanwhile: the business write may then
// have happened twice), or Release deletes it so the message can be
// claimed again at once. Choose a lease longer than processing ever takes.
//
// Times come from PostgreSQL's clock only (clock_timestamp()), so the
// consumers' clocks need not agree. All SQL is parameterized; the table
// name is checked and quoted.
package dedup

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver for database/sql
	"github.com/twmb/franz-go/pkg/kgo"

	txhub "github.com/txhub/txhub/clients/go"
)

// Defaults.
const (
	TableDefault = "txhub_dedup"
	LeaseDefault = 60 * time.Second
)

const tableTemplate = `CREATE TABLE IF NOT EXISTS %s (
    biz_id       text        NOT NULL,
    message_key  text        NOT NULL,
    state        text        NOT NULL CHECK (state IN ('processing', 'processed')),
    holder       text        NOT NULL,
    expires_at   timestamptz CHECK (state = 'processed' OR expires_at IS NOT NULL),
    processed_at timestamptz CHECK (state = 'processing' OR processed_at IS NOT NULL),
    PRIMARY KEY (biz_id, message_key)
)`

// TableSQL is the CREATE TABLE statement for the default table name, for
// your own migrations (the same text as the C library's
// txhub_dedup_table_sql() and the Python package's TABLE_SQL).
var TableSQL = fmt.Sprintf(tableTemplate, TableDefault)

// Result is what a claim found.
type Result int

// The three results.
const (
	Claimed   Result = iota + 1 // yours: do the business write, then Done
	Duplicate                   // processed already: skip the record
	Busy                        // another live holder: try again later (do not commit the record's offset)
)

func (r Result) String() string {
	switch r {
	case Claimed:
		return "claimed"
	case Duplicate:
		return "duplicate"
	case Busy:
		return "busy"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// Claim is a claim, as Claim and ClaimTx return it: plain data.
type Claim struct {
	Result     Result
	BizID      string
	MessageKey string
	Holder     string        // random hex token of this claim
	InCallerTx bool          // written in the caller's transaction
	BusyFor    time.Duration // Busy: until the holder's lease ends
}

// Execer is what Done, Release, Purge and CreateTable run their statement
// on: a *sql.DB (its own transaction) or the caller's *sql.Tx.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Querier is what the claims and CreateTable run on: a *sql.DB, *sql.Conn
// or *sql.Tx.
type Querier interface {
	Execer
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Dedup claims messages in one table. It holds no connection and is safe
// for concurrent use.
type Dedup struct {
	name  string // as given, for to_regclass
	table string // quoted
	lease time.Duration
}

var part = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// New returns a Dedup on table ([schema.]name of a-z, 0-9 and _, not
// starting with a digit; "": txhub_dedup) with the lease of claims in
// their own transactions (0: 60 s).
func New(table string, lease time.Duration) (*Dedup, error) {
	if table == "" {
		table = TableDefault
	}
	parts := strings.Split(table, ".")
	if len(parts) > 2 {
		return nil, txhub.Invalid("table must be [schema.]name of a-z, 0-9 and _, not starting with a digit")
	}
	for _, p := range parts {
		if !part.MatchString(p) {
			return nil, txhub.Invalid("table must be [schema.]name of a-z, 0-9 and _, not starting with a digit")
		}
	}
	if lease == 0 {
		lease = LeaseDefault
	}
	if lease < time.Millisecond {
		return nil, txhub.Invalid("lease must be at least 1 ms")
	}
	return &Dedup{name: table, table: pgx.Identifier(parts).Sanitize(), lease: lease}, nil
}

// dbError wraps a database error; retriable for serialization failures,
// deadlocks, lock time-outs, cancelled statements, a server shutting
// down or restarting, and lost connections.
func dbError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &txhub.Error{Kind: txhub.ErrDatabase, Reason: "the context ended", Err: err}
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		retry := strings.HasPrefix(pg.Code, "08")
		switch pg.Code {
		case "40001", "40P01", "55P03", "57014", "57P01", "57P02", "57P03":
			retry = true
		}
		return &txhub.Error{Kind: txhub.ErrDatabase, Reason: "SQLSTATE " + pg.Code, Retriable: retry, Err: err}
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	retry := errors.As(err, &ne) || errors.As(err, &ce) || pgconn.SafeToRetry(err) ||
		errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "conn closed")
	return &txhub.Error{Kind: txhub.ErrDatabase, Reason: "PostgreSQL", Retriable: retry, Err: err}
}

// CreateTable creates the table if it does not exist.
func (d *Dedup) CreateTable(ctx context.Context, db Querier) error {
	var exists bool
	if err := db.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", d.name).Scan(&exists); err != nil {
		return dbError(err)
	}
	if exists {
		return nil
	}
	_, err := db.ExecContext(ctx, fmt.Sprintf(tableTemplate, d.table))
	return dbError(err)
}

func header(rec *kgo.Record, name string) (string, bool) {
	for _, h := range rec.Headers {
		if h.Key == name {
			return string(h.Value), true
		}
	}
	return "", false
}

// RecordIDs returns a forwarded record's biz_id and message_key from its
// txhub-biz-id and txhub-message-key headers; ErrInvalid when it has
// none (not a txhub record) or they are not valid ids.
func RecordIDs(rec *kgo.Record) (bizID, messageKey string, err error) {
	if rec == nil {
		return "", "", txhub.Invalid("no record")
	}
	biz, ok1 := header(rec, "txhub-biz-id")
	key, ok2 := header(rec, "txhub-message-key")
	if !ok1 || !ok2 {
		return "", "", txhub.Invalid("the record has no txhub-biz-id or txhub-message-key header")
	}
	return biz, key, checkIDs(biz, key)
}

func checkIDs(biz, key string) error {
	if !utf8.ValidString(biz) {
		return txhub.Invalid("txhub-biz-id is not valid UTF-8")
	}
	if !utf8.ValidString(key) {
		return txhub.Invalid("txhub-message-key is not valid UTF-8")
	}
	if err := txhub.CheckID("txhub-biz-id", biz, txhub.BizIDMax); err != nil {
		return err
	}
	return txhub.CheckID("txhub-message-key", key, txhub.MessageKeyMax)
}

func holder() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// ClaimTx claims a message in the caller's transaction (see the package's
// text). An error leaves that transaction failed: roll it back.
func (d *Dedup) ClaimTx(ctx context.Context, tx *sql.Tx, bizID, messageKey string) (Claim, error) {
	if tx == nil {
		return Claim{}, txhub.Invalid("no transaction")
	}
	if err := checkIDs(bizID, messageKey); err != nil {
		return Claim{}, err
	}
	h := holder()
	for range 3 { // a row released between our statements: try again
		c, found, err := d.try(ctx, tx, bizID, messageKey, h, true)
		if err != nil || found {
			return c, err
		}
	}
	return Claim{}, changing()
}

// Claim claims a message in its own transactions on db, with a lease (see
// the package's text).
func (d *Dedup) Claim(ctx context.Context, db *sql.DB, bizID, messageKey string) (Claim, error) {
	if db == nil {
		return Claim{}, txhub.Invalid("no database")
	}
	if err := checkIDs(bizID, messageKey); err != nil {
		return Claim{}, err
	}
	h := holder()
	for range 3 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return Claim{}, dbError(err)
		}
		c, found, err := d.try(ctx, tx, bizID, messageKey, h, false)
		if err != nil {
			_ = tx.Rollback()
			return Claim{}, err
		}
		if err := tx.Commit(); err != nil {
			return Claim{}, dbError(err)
		}
		if found {
			return c, nil
		}
	}
	return Claim{}, changing()
}

// ClaimRecordTx is ClaimTx by a forwarded record's headers (RecordIDs).
func (d *Dedup) ClaimRecordTx(ctx context.Context, tx *sql.Tx, rec *kgo.Record) (Claim, error) {
	biz, key, err := RecordIDs(rec)
	if err != nil {
		return Claim{}, err
	}
	return d.ClaimTx(ctx, tx, biz, key)
}

// ClaimRecord is Claim by a forwarded record's headers (RecordIDs).
func (d *Dedup) ClaimRecord(ctx context.Context, db *sql.DB, rec *kgo.Record) (Claim, error) {
	biz, key, err := RecordIDs(rec)
	if err != nil {
		return Claim{}, err
	}
	return d.Claim(ctx, db, biz, key)
}

func changing() error {
	return &txhub.Error{Kind: txhub.ErrDatabase, Reason: "the claim row kept changing; try again", Retriable: true}
}

func (d *Dedup) try(ctx context.Context, q Querier, biz, key, h string, inTx bool) (Claim, bool, error) {
	state := "processing"
	if inTx {
		state = "processed"
	}
	c := Claim{BizID: biz, MessageKey: key, Holder: h, InCallerTx: inTx}
	var won int
	err := q.QueryRowContext(ctx, "INSERT INTO "+d.table+" AS d "+
		"(biz_id, message_key, state, holder, expires_at, processed_at) "+
		"VALUES ($1, $2, $3::text, $4, CASE WHEN $3::text = 'processing' THEN "+
		"clock_timestamp() + $5::bigint * interval '1 millisecond' END, "+
		"CASE WHEN $3::text = 'processed' THEN clock_timestamp() END) "+
		"ON CONFLICT (biz_id, message_key) DO UPDATE SET state = excluded.state, "+
		"holder = excluded.holder, expires_at = excluded.expires_at, "+
		"processed_at = excluded.processed_at "+
		"WHERE d.state = 'processing' AND d.expires_at < clock_timestamp() RETURNING 1",
		biz, key, state, h, d.lease.Milliseconds()).Scan(&won)
	if err == nil {
		c.Result = Claimed
		return c, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Claim{}, false, dbError(err)
	}
	var got string
	var busyMS sql.NullInt64
	err = q.QueryRowContext(ctx, "SELECT state, greatest(0, ceil(extract(epoch FROM expires_at - "+
		"clock_timestamp()) * 1000))::bigint FROM "+d.table+" WHERE biz_id = $1 AND message_key = $2",
		biz, key).Scan(&got, &busyMS)
	if errors.Is(err, sql.ErrNoRows) {
		return Claim{}, false, nil
	}
	if err != nil {
		return Claim{}, false, dbError(err)
	}
	if got == "processed" {
		c.Result = Duplicate
	} else {
		c.Result = Busy
		c.BusyFor = time.Duration(busyMS.Int64) * time.Millisecond
	}
	return c, true, nil
}

func own(c Claim) error {
	if c.Result != Claimed {
		return txhub.Invalid("Done and Release take a claim whose Result is Claimed")
	}
	return nil
}

// Done marks a claim processed: on db for a claim in its own transactions,
// on the same *sql.Tx for one in the caller's. ErrClaimLost when it
// expired and was taken over (the business write may have happened twice).
func (d *Dedup) Done(ctx context.Context, db Execer, c Claim) error {
	if err := own(c); err != nil {
		return err
	}
	res, err := db.ExecContext(ctx, "UPDATE "+d.table+" SET state = 'processed', expires_at = NULL, "+
		"processed_at = coalesce(processed_at, clock_timestamp()) "+
		"WHERE biz_id = $1 AND message_key = $2 AND holder = $3", c.BizID, c.MessageKey, c.Holder)
	if err != nil {
		return dbError(err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return &txhub.Error{Kind: txhub.ErrClaimLost, Reason: "the claim expired and another consumer took it over"}
	}
	return nil
}

// Release gives a claim up after a failed business write, so the message
// can be claimed again at once (a processed row outside the caller's
// transaction is never deleted).
func (d *Dedup) Release(ctx context.Context, db Execer, c Claim) error {
	if err := own(c); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "DELETE FROM "+d.table+" WHERE biz_id = $1 AND message_key = $2 "+
		"AND holder = $3 AND (state = 'processing' OR $4::boolean)", c.BizID, c.MessageKey, c.Holder, c.InCallerTx)
	return dbError(err)
}

// Purge deletes processed rows older than olderThan and returns how many.
// A very late duplicate of a purged message is processed again.
func (d *Dedup) Purge(ctx context.Context, db Execer, olderThan time.Duration) (int64, error) {
	if olderThan < 0 {
		return 0, txhub.Invalid("olderThan must not be negative")
	}
	res, err := db.ExecContext(ctx, "DELETE FROM "+d.table+" WHERE state = 'processed' "+
		"AND processed_at < clock_timestamp() - $1::bigint * interval '1 millisecond'", olderThan.Milliseconds())
	if err != nil {
		return 0, dbError(err)
	}
	n, err := res.RowsAffected()
	return n, dbError(err)
}
