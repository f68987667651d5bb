// Command consumer is a downstream consumer of orders.created, in Go, that
// processes each order once although txhub delivers at least once.
//
// Each record is claimed by its txhub-biz-id and txhub-message-key headers
// in the same PostgreSQL transaction as the business write (a shipment
// row), so the two commit together: a duplicate finds the claim and is
// skipped, a failed write leaves no claim, and the record is processed
// again. Offsets are committed to Kafka after the database.
//
//	consumer [-topic orders.created] [-group shipping] [-idle SECONDS]
//
// Connection settings: -pg (TXHUB_PG), -brokers (TXHUB_BROKERS).
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	txhub "github.com/txhub/txhub/clients/go"
	"github.com/txhub/txhub/clients/go/dedup"
)

// ship processes one record and returns what happened.
func ship(ctx context.Context, db *sql.DB, d *dedup.Dedup, rec *kgo.Record) (string, error) {
	for {
		result, err := shipOnce(ctx, db, d, rec)
		if err == nil && result != dedup.Busy {
			return result.String(), nil
		}
		if err != nil && !txhub.IsRetriable(err) {
			return "", err
		}
		time.Sleep(time.Second) // busy elsewhere, or a retriable error: the same record again
	}
}

func shipOnce(ctx context.Context, db *sql.DB, d *dedup.Dedup, rec *kgo.Record) (dedup.Result, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	claim, err := d.ClaimRecordTx(ctx, tx, rec)
	if err != nil {
		return 0, err
	}
	if claim.Result == dedup.Claimed {
		var order struct {
			OrderID string `json:"order_id"`
			Amount  string `json:"amount"`
		}
		if err := json.Unmarshal(rec.Value, &order); err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO shipments (order_id, amount) VALUES ($1, $2)",
			order.OrderID, order.Amount); err != nil {
			return 0, err
		}
		if err := d.Done(ctx, tx, claim); err != nil {
			return 0, err
		}
	}
	return claim.Result, tx.Commit()
}

func main() {
	pg := flag.String("pg", os.Getenv("TXHUB_PG"), "PostgreSQL connection string")
	brokers := flag.String("brokers", os.Getenv("TXHUB_BROKERS"), "Kafka brokers, comma-separated")
	topic := flag.String("topic", "orders.created", "the forward topic")
	group := flag.String("group", "shipping", "the consumer group")
	idle := flag.Float64("idle", 0, "stop this many seconds after the last record (30 s after the start when none came); 0: never")
	flag.Parse()
	if err := run(*pg, *brokers, *topic, *group, time.Duration(*idle*float64(time.Second))); err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func run(pg, brokers, topic, group string, idle time.Duration) error {
	ctx := context.Background()
	db, err := sql.Open("pgx", pg)
	if err != nil {
		return err
	}
	defer db.Close()
	d, _ := dedup.New("", 0)
	if err := d.CreateTable(ctx, db); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS shipments (order_id text NOT NULL, amount numeric NOT NULL)"); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		txhub.CompatibleVersions())
	if err != nil {
		return err
	}
	defer cl.Close()
	start, last := time.Now(), time.Time{}
	for {
		if idle > 0 && ((last.IsZero() && time.Since(start) > 30*time.Second) || (!last.IsZero() && time.Since(last) > idle)) {
			return nil
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fetches := cl.PollFetches(pctx)
		cancel()
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return fe.Err
			}
		}
		var failed error
		fetches.EachRecord(func(rec *kgo.Record) {
			if failed != nil {
				return
			}
			last = time.Now()
			what, err := ship(ctx, db, d, rec)
			if errors.Is(err, txhub.ErrInvalid) { // not a txhub record: nothing to deduplicate on
				what, err = fmt.Sprintf("skipped (%v)", err), nil
			}
			if err != nil {
				failed = err
				return
			}
			fmt.Printf("%s/%d@%d: %s\n", rec.Topic, rec.Partition, rec.Offset, what)
			failed = cl.CommitRecords(ctx, rec)
		})
		if failed != nil {
			return failed
		}
	}
}
