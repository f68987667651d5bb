package dedup_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	txhub "github.com/txhub/txhub/clients/go"
	"github.com/txhub/txhub/clients/go/dedup"
)

// testDB gives the test a database of its own on TXHUB_PG (set by
// tests/with-services.sh) with the dedup table and an "applied" table.
func testDB(t *testing.T) (*sql.DB, string) {
	pg := os.Getenv("TXHUB_PG")
	if pg == "" {
		t.Skip("TXHUB_PG is not set: run through tests/with-services.sh")
	}
	name := "go_" + strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(t.Name(), ""))
	name = fmt.Sprintf("%.40s_%d", name, os.Getpid())
	admin, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := context.Background()
	for _, q := range []string{"DROP DATABASE IF EXISTS " + name, "CREATE DATABASE " + name} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	dsn := pg + " dbname=" + name
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	d, _ := dedup.New("", 0)
	for range 2 { // twice: nothing happens the second time
		if err := d.CreateTable(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE applied (biz_id text, message_key text, worker text)"); err != nil {
		t.Fatal(err)
	}
	return db, dsn
}

func count(t *testing.T, db *sql.DB, query string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestOwnTransactionsClaimBusyDoneDuplicate(t *testing.T) {
	db, _ := testDB(t)
	ctx := context.Background()
	d, _ := dedup.New("", 0)
	claim := must[dedup.Claim](t)
	c := claim(d.Claim(ctx, db, "shop", "o-1"))
	if c.Result != dedup.Claimed || c.InCallerTx || len(c.Holder) != 32 {
		t.Fatalf("%+v", c)
	}
	busy := claim(d.Claim(ctx, db, "shop", "o-1"))
	if busy.Result != dedup.Busy || busy.BusyFor <= 50*time.Second || busy.BusyFor > 60*time.Second {
		t.Fatalf("%+v", busy)
	}
	for range 2 { // twice: fine
		if err := d.Done(ctx, db, c); err != nil {
			t.Fatal(err)
		}
	}
	if r := claim(d.Claim(ctx, db, "shop", "o-1")).Result; r != dedup.Duplicate {
		t.Fatalf("after done: %v", r)
	}
	if err := d.Release(ctx, db, c); err != nil { // after done: never un-processes
		t.Fatal(err)
	}
	if r := claim(d.Claim(ctx, db, "shop", "o-1")).Result; r != dedup.Duplicate {
		t.Fatalf("after release of a done claim: %v", r)
	}
	c2 := claim(d.Claim(ctx, db, "shop2", "o-1"))
	if c2.Result != dedup.Claimed {
		t.Fatalf("%+v", c2)
	}
	if err := d.Release(ctx, db, c2); err != nil {
		t.Fatal(err)
	}
	if r := claim(d.Claim(ctx, db, "shop2", "o-1")).Result; r != dedup.Claimed {
		t.Fatalf("after release: %v", r)
	}
	if n, err := d.Purge(ctx, db, 0); n != 1 || err != nil {
		t.Fatalf("purged %d, %v", n, err)
	}
}

func TestAnExpiredClaimIsTakenOver(t *testing.T) {
	db, _ := testDB(t)
	ctx := context.Background()
	d, _ := dedup.New("", 0)
	short, _ := dedup.New("", 300*time.Millisecond)
	claim := must[dedup.Claim](t)
	first := claim(short.Claim(ctx, db, "shop", "o-1"))
	busy := claim(short.Claim(ctx, db, "shop", "o-1"))
	if busy.Result != dedup.Busy {
		t.Fatalf("%+v", busy)
	}
	var second dedup.Claim
	for second.Result != dedup.Claimed { // until PostgreSQL's clock passes the lease
		time.Sleep(busy.BusyFor + 10*time.Millisecond)
		second = claim(short.Claim(ctx, db, "shop", "o-1"))
	}
	if second.Holder == first.Holder {
		t.Fatal("the same holder twice")
	}
	if err := d.Done(ctx, db, first); !errors.Is(err, txhub.ErrClaimLost) {
		t.Fatalf("done of the stale claim: %v", err)
	}
	if err := d.Release(ctx, db, first); err != nil { // stale: takes nothing
		t.Fatal(err)
	}
	if err := d.Done(ctx, db, second); err != nil {
		t.Fatal(err)
	}
}

// TestMain doubles as the consumer that TestAConsumerKilledWhileProcessing
// runs in a process of its own: it claims, says so, and waits to be killed.
func TestMain(m *testing.M) {
	dsn := os.Getenv("TXHUB_GO_DEDUP_HOLD")
	if dsn == "" {
		os.Exit(m.Run())
	}
	db, _ := sql.Open("pgx", dsn)
	d, _ := dedup.New("", time.Second)
	c, err := d.Claim(context.Background(), db, "shop", "o-9")
	if err != nil || c.Result != dedup.Claimed {
		fmt.Println("claim failed:", err)
		os.Exit(1)
	}
	fmt.Println("claimed")
	time.Sleep(time.Hour)
}

func TestAConsumerKilledWhileProcessingIsTakenOverAfterExpiry(t *testing.T) {
	db, dsn := testDB(t)
	ctx := context.Background()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "TXHUB_GO_DEDUP_HOLD="+dsn)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "claimed" {
		t.Fatalf("helper: %q %v", buf, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	d, _ := dedup.New("", 0)
	claim := must[dedup.Claim](t)
	busy := claim(d.Claim(ctx, db, "shop", "o-9"))
	if busy.Result != dedup.Busy || busy.BusyFor > time.Second {
		t.Fatalf("%+v", busy)
	}
	var c dedup.Claim
	for c.Result != dedup.Claimed {
		time.Sleep(busy.BusyFor + 10*time.Millisecond)
		c = claim(d.Claim(ctx, db, "shop", "o-9"))
	}
	if err := d.Done(ctx, db, c); err != nil {
		t.Fatal(err)
	}
}

func TestInTheCallersTransactionTheMarkCommitsWithTheBusinessWrite(t *testing.T) {
	db, _ := testDB(t)
	ctx := context.Background()
	d, _ := dedup.New("", 0)
	claim := must[dedup.Claim](t)
	tx := must[*sql.Tx](t)(db.BeginTx(ctx, nil))
	c := claim(d.ClaimTx(ctx, tx, "shop", "o-1"))
	if c.Result != dedup.Claimed || !c.InCallerTx {
		t.Fatalf("%+v", c)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO applied VALUES ('shop', 'o-1', 'a')"); err != nil {
		t.Fatal(err)
	}
	if r := claim(d.ClaimTx(ctx, tx, "shop", "o-1")).Result; r != dedup.Duplicate { // the same transaction
		t.Fatalf("in the same transaction: %v", r)
	}
	if err := d.Done(ctx, tx, c); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "SELECT count(*) FROM txhub_dedup"); n != 0 {
		t.Fatalf("visible before the commit: %d rows", n)
	}
	// a concurrent claim waits on the row lock, then sees the commit
	seen := make(chan dedup.Result)
	go func() {
		c, err := d.Claim(ctx, db, "shop", "o-1")
		if err != nil {
			t.Error(err)
		}
		seen <- c.Result
	}()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if r := <-seen; r != dedup.Duplicate {
		t.Fatalf("after the commit: %v", r)
	}
	// a business write that fails: no mark
	tx = must[*sql.Tx](t)(db.BeginTx(ctx, nil))
	if r := claim(d.ClaimTx(ctx, tx, "shop", "o-2")).Result; r != dedup.Claimed {
		t.Fatalf("o-2: %v", r)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO applied VALUES ('shop', 'o-2', (1 / 0)::text)"); err == nil {
		t.Fatal("1 / 0 succeeded")
	}
	// the transaction has failed: a claim in it is a database error, not retriable
	if _, err := d.ClaimTx(ctx, tx, "shop", "o-3"); !errors.Is(err, txhub.ErrDatabase) || txhub.IsRetriable(err) {
		t.Fatalf("claim in a failed transaction: %v", err)
	}
	_ = tx.Rollback()
	if n := count(t, db, "SELECT count(*) FROM txhub_dedup WHERE message_key = 'o-2'"); n != 0 {
		t.Fatalf("o-2 marked after a rollback: %d", n)
	}
	if r := claim(d.Claim(ctx, db, "shop", "o-2")).Result; r != dedup.Claimed {
		t.Fatalf("o-2 after the rollback: %v", r)
	}
}

const messages = 30

// apply processes one message; false when it must be tried again later.
func apply(ctx context.Context, d *dedup.Dedup, db *sql.DB, key, worker string, ownTx bool) (bool, error) {
	if ownTx {
		c, err := d.Claim(ctx, db, "shop", key)
		if err != nil {
			return false, err
		}
		if c.Result == dedup.Claimed {
			if _, err := db.ExecContext(ctx, "INSERT INTO applied VALUES ('shop', $1, $2)", key, worker); err != nil {
				return false, err
			}
			if err := d.Done(ctx, db, c); err != nil {
				return false, err
			}
		}
		return c.Result != dedup.Busy, nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback() }()
	c, err := d.ClaimTx(ctx, tx, "shop", key)
	if err != nil {
		if txhub.IsRetriable(err) {
			return false, nil
		}
		return false, err
	}
	if c.Result == dedup.Claimed {
		if _, err := tx.ExecContext(ctx, "INSERT INTO applied VALUES ('shop', $1, $2)", key, worker); err != nil {
			return false, err
		}
		if err := d.Done(ctx, tx, c); err != nil {
			return false, err
		}
	}
	return c.Result != dedup.Busy, tx.Commit()
}

func TestRacingWorkersApplyOnce(t *testing.T) {
	for _, ownTx := range []bool{false, true} {
		t.Run(fmt.Sprintf("ownTx=%v", ownTx), func(t *testing.T) {
			db, dsn := testDB(t)
			ctx := context.Background()
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					conn, _ := sql.Open("pgx", dsn) // a pool of its own, as another consumer
					defer conn.Close()
					d, _ := dedup.New("", 0)
					var pending []string
					for i := range messages {
						pending = append(pending, fmt.Sprintf("m-%d", i))
					}
					for range 200 {
						var next []string
						for _, k := range pending {
							finished, err := apply(ctx, d, conn, k, fmt.Sprint("w", w), ownTx)
							if err != nil {
								t.Error(err)
								return
							}
							if !finished {
								next = append(next, k)
							}
						}
						if pending = next; len(pending) == 0 {
							return
						}
						time.Sleep(20 * time.Millisecond)
					}
					t.Errorf("worker %d: %v still busy", w, pending)
				}()
			}
			wg.Wait()
			if n := count(t, db, "SELECT count(*) FROM applied"); n != messages {
				t.Fatalf("%d applied, want %d", n, messages)
			}
			if n := count(t, db, "SELECT count(DISTINCT message_key) FROM applied"); n != messages {
				t.Fatalf("%d distinct", n)
			}
			if n := count(t, db, "SELECT count(*) FROM txhub_dedup WHERE state = 'processed'"); n != messages {
				t.Fatalf("%d processed", n)
			}
		})
	}
}

func TestBadIDsAreRefusedBeforeAnySQL(t *testing.T) {
	db, _ := testDB(t)
	ctx := context.Background()
	d, _ := dedup.New("", 0)
	bad := [][2]string{{"", "k"}, {"b", ""}, {"b", strings.Repeat("k", 256)}, {strings.Repeat("b", 65), "k"},
		{"b", "k\xff"}, {"b", "k\x01"}, {"b", "k\x00x"}, {"b\n", "k"}, {"b", "a\u0085"}}
	tx := must[*sql.Tx](t)(db.BeginTx(ctx, nil))
	defer func() { _ = tx.Rollback() }()
	for _, ids := range bad {
		if _, err := d.Claim(ctx, db, ids[0], ids[1]); !errors.Is(err, txhub.ErrInvalid) {
			t.Errorf("Claim(%q, %q): %v", ids[0], ids[1], err)
		}
		if _, err := d.ClaimTx(ctx, tx, ids[0], ids[1]); !errors.Is(err, txhub.ErrInvalid) {
			t.Errorf("ClaimTx(%q, %q): %v", ids[0], ids[1], err)
		}
	}
	if n := count(t, db, "SELECT count(*) FROM txhub_dedup"); n != 0 {
		t.Fatalf("%d rows", n)
	}
}

func TestBadTableNamesAndLeases(t *testing.T) {
	for _, table := range []string{"a;drop table x", "A", "1x", "a.b.c", "a-b", ".a", `a"b`, strings.Repeat("a", 64)} {
		if _, err := dedup.New(table, 0); !errors.Is(err, txhub.ErrInvalid) {
			t.Errorf("table %q: %v", table, err)
		}
	}
	if _, err := dedup.New("", -time.Second); !errors.Is(err, txhub.ErrInvalid) {
		t.Errorf("negative lease: %v", err)
	}
	if !strings.HasPrefix(dedup.TableSQL, "CREATE TABLE IF NOT EXISTS txhub_dedup (") {
		t.Errorf("TableSQL: %s", dedup.TableSQL)
	}
}

func TestClaimRecordSchemaTableAndErrors(t *testing.T) {
	db, _ := testDB(t)
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA app"); err != nil {
		t.Fatal(err)
	}
	own, err := dedup.New("app.seen", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := own.CreateTable(ctx, db); err != nil {
		t.Fatal(err)
	}
	rec := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "x", Value: []byte("1")},
		{Key: "txhub-biz-id", Value: []byte("shop")}, {Key: "txhub-message-key", Value: []byte("o-1")}}}
	c, err := own.ClaimRecord(ctx, db, rec)
	if err != nil || c.Result != dedup.Claimed || c.BizID != "shop" || c.MessageKey != "o-1" {
		t.Fatalf("%+v %v", c, err)
	}
	if n := count(t, db, "SELECT count(*) FROM app.seen"); n != 1 {
		t.Fatalf("app.seen has %d rows", n)
	}
	half := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "txhub-biz-id", Value: []byte("shop")}}}
	if _, err := own.ClaimRecord(ctx, db, half); !errors.Is(err, txhub.ErrInvalid) {
		t.Fatalf("a record without txhub-message-key: %v", err)
	}
	dup := c
	dup.Result = dedup.Duplicate
	if err := own.Done(ctx, db, dup); !errors.Is(err, txhub.ErrInvalid) {
		t.Fatalf("Done of a duplicate: %v", err)
	}
	nowhere, _ := dedup.New("nowhere", 0)
	_, err = nowhere.Claim(ctx, db, "b", "k")
	var e *txhub.Error
	if !errors.Is(err, txhub.ErrDatabase) || txhub.IsRetriable(err) || !errors.As(err, &e) ||
		!strings.Contains(err.Error(), "42P01") || e.Status() != "db" {
		t.Fatalf("a missing table: %v", err)
	}
}

// A lost connection is retriable: the consumer runs the transaction again.
func TestALostConnectionIsRetriable(t *testing.T) {
	db, _ := testDB(t)
	ctx := context.Background()
	d, _ := dedup.New("", 0)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var pid int
	if err := conn.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := db.ExecContext(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
		t.Fatal(err)
	}
	_, err = d.ClaimTx(ctx, tx, "shop", "o-1")
	if !errors.Is(err, txhub.ErrDatabase) || !txhub.IsRetriable(err) {
		t.Fatalf("got %v (retriable %v)", err, txhub.IsRetriable(err))
	}
}
