// Command orderservice is an order service on txhub, in Go: the producer's
// side to copy.
//
// Placing an order is txhub's three steps around the service's own
// PostgreSQL transaction:
//  1. prepare: the order.created event goes to txhub, which stores it but
//     publishes nothing yet (Producer.Prepare returns once Kafka has it);
//  2. the local transaction: the order row, and a row in txhub_barrier
//     saying "committed", commit together;
//  3. commit: txhub publishes the event.
//
// If the service dies between 1 and 3, txhub asks its check-back endpoint
// (serve), which answers from the database and never guesses: it inserts
// (message_key, 'rolled_back') into txhub_barrier unless the local
// transaction's 'committed' row is there, so a transaction that has not
// committed by then never can (its own barrier insert fails).
//
//	orderservice [flags] order [-amount 12.50] [-crash after-prepare|before-commit] ORDER-ID
//	orderservice [flags] serve [-port 8080] [-secret S]
//
// Flags: -pg (TXHUB_PG), -brokers (TXHUB_BROKERS), -control-topic
// (ORDERS_CONTROL_TOPIC), -forward-topic (ORDERS_FORWARD_TOPIC),
// -checkback-url (ORDERS_CHECKBACK_URL); the secret also from
// TXHUB_CHECKBACK_SECRET. A W3C trace context in TRACEPARENT (and
// TRACESTATE), as OpenTelemetry's environment carrier has it, becomes the
// event's. Exit status: 0 placed, 1 not placed (a duplicate, or rolled back
// by a check-back), 2 the local transaction failed (rolled back), 3 the
// demonstration's crash, 4 any other error.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/otel/propagation"

	txhub "github.com/txhub/txhub/clients/go"
	"github.com/txhub/txhub/clients/go/checkback"
)

const bizID = "shop"

const schema = `
CREATE TABLE IF NOT EXISTS orders (id text PRIMARY KEY, amount numeric NOT NULL CHECK (amount > 0));
CREATE TABLE IF NOT EXISTS txhub_barrier (
    message_key text PRIMARY KEY,
    outcome     text NOT NULL CHECK (outcome IN ('committed', 'rolled_back'))
)`

type settings struct {
	pg, brokers, controlTopic, forwardTopic, checkbackURL string
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	var s settings
	flag.StringVar(&s.pg, "pg", os.Getenv("TXHUB_PG"), "PostgreSQL connection string")
	flag.StringVar(&s.brokers, "brokers", env("TXHUB_BROKERS", "localhost:9092"), "Kafka brokers, comma-separated")
	flag.StringVar(&s.controlTopic, "control-topic", env("ORDERS_CONTROL_TOPIC", txhub.ControlTopicDefault), "txhub's control topic")
	flag.StringVar(&s.forwardTopic, "forward-topic", env("ORDERS_FORWARD_TOPIC", "orders.created"), "where the events go")
	flag.StringVar(&s.checkbackURL, "checkback-url", env("ORDERS_CHECKBACK_URL", "http://127.0.0.1:8080/txhub/check"), "this service's check-back endpoint")
	flag.Parse()
	db, err := sql.Open("pgx", s.pg)
	if err == nil {
		_, err = db.Exec(schema)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "orderservice:", err)
		os.Exit(4)
	}
	switch flag.Arg(0) {
	case "order":
		os.Exit(order(s, db, flag.Args()[1:]))
	case "serve":
		os.Exit(serve(db, flag.Args()[1:]))
	}
	fmt.Fprintln(os.Stderr, "usage: orderservice [flags] order [-amount A] [-crash WHEN] ORDER-ID | serve [-port P] [-secret S]")
	os.Exit(4)
}

// traceContext is ctx with the trace context of the environment, if any.
func traceContext(ctx context.Context) context.Context {
	carrier := propagation.MapCarrier{}
	if tp := os.Getenv("TRACEPARENT"); tp != "" {
		carrier.Set("traceparent", tp)
		carrier.Set("tracestate", os.Getenv("TRACESTATE"))
	}
	return propagation.TraceContext{}.Extract(ctx, carrier)
}

func order(s settings, db *sql.DB, args []string) int {
	fs := flag.NewFlagSet("order", flag.ExitOnError)
	amount := fs.String("amount", "12.50", "the order's amount")
	crash := fs.String("crash", "", "stop after-prepare or before-commit (a demonstration)")
	_ = fs.Parse(args)
	key := fs.Arg(0)
	if key == "" {
		fmt.Fprintln(os.Stderr, "order: an ORDER-ID is required")
		return 4
	}
	ctx, cancel := context.WithTimeout(traceContext(context.Background()), time.Minute)
	defer cancel()
	producer, err := txhub.NewProducer(txhub.Config{Brokers: strings.Split(s.brokers, ","), ControlTopic: s.controlTopic})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	defer producer.Close()

	payload, _ := json.Marshal(map[string]string{"order_id": key, "amount": *amount})
	event := &txhub.Message{BizID: bizID, MessageKey: key, Payload: txhub.JSON(payload),
		ForwardTopic: s.forwardTopic, ForwardKey: &key, CheckbackURL: s.checkbackURL}
	if err := producer.Prepare(ctx, event); err != nil { // 1.
		fmt.Fprintln(os.Stderr, err) // nothing to undo
		return 4
	}
	if *crash == "after-prepare" {
		os.Exit(3) // the demonstration's crash: no local transaction, no decision
	}
	if err := placeLocally(ctx, db, key, *amount); err != nil { // 2.
		if rerr := producer.Rollback(ctx, bizID, key); rerr != nil {
			fmt.Fprintln(os.Stderr, rerr) // the check-back settles it
		}
		var pg *pgconn.PgError
		if errors.As(err, &pg) && pg.Code == "23505" {
			// the order exists already, or a check-back declared it rolled back
			fmt.Fprintf(os.Stderr, "%s: not placed (a duplicate, or rolled back by a check-back)\n", key)
			return 1
		}
		fmt.Fprintf(os.Stderr, "%s: rolled back: %v\n", key, err)
		return 2
	}
	if *crash == "before-commit" {
		os.Exit(3) // committed locally, no decision sent: the check-back finds it
	}
	if err := producer.Commit(ctx, bizID, key); err != nil { // 3.
		fmt.Fprintln(os.Stderr, err) // the check-back settles it
	}
	fmt.Printf("%s: placed\n", key)
	return 0
}

func placeLocally(ctx context.Context, db *sql.DB, key, amount string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, amount) VALUES ($1, $2)", key, amount); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO txhub_barrier (message_key, outcome) VALUES ($1, 'committed')", key); err != nil {
		return err
	}
	return tx.Commit()
}

// resolve answers a check-back from the barrier, never guessing.
func resolve(db *sql.DB) checkback.Resolver {
	return func(ctx context.Context, req checkback.Request) (checkback.Outcome, error) {
		if req.BizID != bizID {
			return "", fmt.Errorf("not our business line: %s", req.BizID) // answered 503
		}
		// waits for a local transaction in flight on the same key
		if _, err := db.ExecContext(ctx, "INSERT INTO txhub_barrier (message_key, outcome) VALUES ($1, 'rolled_back') "+
			"ON CONFLICT (message_key) DO NOTHING", req.MessageKey); err != nil {
			return "", err
		}
		var outcome string
		err := db.QueryRowContext(ctx, "SELECT outcome FROM txhub_barrier WHERE message_key = $1", req.MessageKey).Scan(&outcome)
		return checkback.Outcome(outcome), err
	}
}

func serve(db *sql.DB, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	port := fs.Int("port", 8080, "the port to listen on (0: any free one)")
	secret := fs.String("secret", os.Getenv("TXHUB_CHECKBACK_SECRET"), "the hub's checkback.secret")
	_ = fs.Parse(args)
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	mux := http.NewServeMux()
	mux.Handle("GET /txhub/check", &checkback.Handler{Resolve: resolve(db), Secret: []byte(*secret)})
	fmt.Printf("listening on %d\n", ln.Addr().(*net.TCPAddr).Port)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, srv.Serve(ln))
	return 4
}
