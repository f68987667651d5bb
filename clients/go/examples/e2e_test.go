// The examples against a real hub, Kafka and PostgreSQL (TXHUB_BIN,
// TXHUB_BROKERS and TXHUB_PG, as tests/with-services.sh sets them): an order
// placed normally is forwarded once, with its trace context; one whose
// service died before its commit is committed and one that died before its
// local transaction is rolled back, both by the example's check-back
// endpoint; one whose local transaction failed is rolled back by the
// service; rolled-back orders are never forwarded; a late transaction is
// fenced off; and the consumer applies each order once although the forward
// topic holds a duplicate, and again nothing when a new group reads it all.
package examples_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/twmb/franz-go/pkg/kgo"

	txhub "github.com/txhub/txhub/clients/go"
)

type env struct {
	t                            *testing.T
	bin, brokers, dsn, name, dir string
	db                           *sql.DB
	topic, forward               string
}

func setup(t *testing.T) *env {
	for _, v := range []string{"TXHUB_PG", "TXHUB_BROKERS", "TXHUB_BIN"} {
		if os.Getenv(v) == "" {
			t.Skipf("%s is not set: run through tests/with-services.sh (meson test --suite go)", v)
		}
	}
	e := &env{t: t, bin: os.Getenv("TXHUB_BIN"), brokers: os.Getenv("TXHUB_BROKERS"), dir: t.TempDir(),
		name: fmt.Sprintf("go_e2e_%d", os.Getpid())}
	e.topic, e.forward = "ctl."+e.name, "fw."+e.name
	admin, err := sql.Open("pgx", os.Getenv("TXHUB_PG"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, q := range []string{"DROP DATABASE IF EXISTS " + e.name, "CREATE DATABASE " + e.name} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	e.dsn = os.Getenv("TXHUB_PG") + " dbname=" + e.name
	if e.db, err = sql.Open("pgx", e.dsn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.db.Close() })
	if out, err := exec.Command(e.bin, append([]string{"migrate"}, e.settings()...)...).CombinedOutput(); err != nil {
		t.Fatalf("txhub migrate: %v\n%s", err, out)
	}
	// the examples, built as a user builds them
	build := exec.Command("go", "build", "-o", e.dir, "./orderservice", "./consumer")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return e
}

func (e *env) settings(extra ...string) []string {
	var out []string
	for _, s := range append([]string{"pg=" + e.dsn, "control_topic=" + e.topic, "group=" + e.name,
		"brokers=" + e.brokers, "kafka.session.timeout.ms=6000", "kafka.heartbeat.interval.ms=500"}, extra...) {
		out = append(out, "-X", s)
	}
	return out
}

func (e *env) cmd(prog string, args ...string) *exec.Cmd {
	c := exec.Command(filepath.Join(e.dir, prog), args...)
	c.Env = append(os.Environ(), "TXHUB_PG="+e.dsn, "ORDERS_CONTROL_TOPIC="+e.topic, "ORDERS_FORWARD_TOPIC="+e.forward)
	return c
}

// start runs the hub until the test ends (or stop), its log in the test's directory.
func (e *env) start(extra ...string) *exec.Cmd {
	hub := exec.Command(e.bin, append([]string{"run"}, e.settings(extra...)...)...)
	log, err := os.Create(filepath.Join(e.dir, "hub.log"))
	if err != nil {
		e.t.Fatal(err)
	}
	hub.Stdout, hub.Stderr = log, log
	if err := hub.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = hub.Process.Kill()
		_ = hub.Wait()
		log.Close()
		if e.t.Failed() {
			b, _ := os.ReadFile(log.Name())
			e.t.Logf("hub log:\n%s", b)
		}
	})
	return hub
}

func (e *env) query(q string, args ...any) string {
	var s sql.NullString
	if err := e.db.QueryRow(q, args...).Scan(&s); err != nil && err != sql.ErrNoRows {
		e.t.Fatal(err)
	}
	return s.String
}

// wait polls q until it gives want or a minute passes; returns the last value.
func (e *env) wait(want, q string, args ...any) string {
	deadline := time.Now().Add(time.Minute)
	for {
		got := e.query(q, args...)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readAll reads the topic from the start until it has at least least
// records and 2 s pass with nothing new (30 s at most).
func (e *env) readAll(topic string, least int) []*kgo.Record {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.brokers, ",")...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), txhub.CompatibleVersions())
	if err != nil {
		e.t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	start, last := time.Now(), time.Now()
	for time.Since(start) < 30*time.Second && (len(out) < least || time.Since(last) < 2*time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		f := cl.PollFetches(ctx)
		cancel()
		f.EachRecord(func(r *kgo.Record) { out = append(out, r); last = time.Now() })
	}
	return out
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if x, ok := err.(*exec.ExitError); ok {
		return x.ExitCode()
	}
	return -1
}

func header(r *kgo.Record, name string) string {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value)
		}
	}
	return ""
}

const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func TestTheGoExamplesEndToEnd(t *testing.T) {
	e := setup(t)
	serve := e.cmd("orderservice", "serve", "-port", "0", "-secret", "s3cret")
	out, _ := serve.StdoutPipe()
	serve.Stderr = os.Stderr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = serve.Process.Kill(); _ = serve.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening on ") {
		t.Fatalf("serve: %q %v", line, err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%s/txhub/check", strings.TrimSpace(strings.TrimPrefix(line, "listening on ")))

	hub := e.start("checkback.secret=s3cret", "checkback.first_after_ms=500", "checkback.backoff_ms=200")
	order := func(key string, args ...string) int {
		c := e.cmd("orderservice", append([]string{"-checkback-url", url, "order"}, append(args, key)...)...)
		c.Env = append(c.Env, "TRACEPARENT="+traceparent, "TRACESTATE=shop=1")
		out, err := c.CombinedOutput()
		t.Logf("order %s: %s", key, strings.TrimSpace(string(out)))
		return exitCode(err)
	}
	for _, o := range []struct {
		key  string
		args []string
		want int
	}{
		{"o-1", nil, 0},
		{"o-2", []string{"-crash", "before-commit"}, 3},
		{"o-3", []string{"-crash", "after-prepare"}, 3},
		{"o-4", []string{"-amount", "-1"}, 2}, // the local transaction fails: rolled back
	} {
		if got := order(o.key, o.args...); got != o.want {
			t.Fatalf("order %s exited %d, want %d", o.key, got, o.want)
		}
	}
	q := "SELECT status || '/' || coalesce(send_status, '-') FROM txhub.messages WHERE message_key = $1"
	for key, want := range map[string]string{"o-1": "committed/sent", "o-2": "committed/sent",
		"o-3": "rolled_back/-", "o-4": "rolled_back/-"} {
		if got := e.wait(want, q, key); got != want {
			t.Fatalf("%s: %q, want %q", key, got, want)
		}
	}
	// the check-back fenced o-3 off: its late local transaction is refused
	if got := order("o-3"); got != 1 {
		t.Fatalf("the late o-3 exited %d, want 1", got)
	}
	if got := e.query("SELECT count(*) FROM orders"); got != "2" {
		t.Fatalf("%s orders, want 2", got)
	}
	if got := e.query("SELECT trace_id FROM txhub.messages WHERE message_key = 'o-1'"); got != traceparent[3:35] {
		t.Fatalf("trace_id %q", got)
	}
	if got := e.query("SELECT count(*) FROM txhub.rejected"); got != "0" {
		t.Fatalf("%s envelopes rejected", got)
	}
	_ = hub.Process.Signal(syscall.SIGTERM)
	if err := hub.Wait(); err != nil {
		t.Fatalf("the hub's exit: %v", err)
	}

	// committed: forwarded once each, with the trace context; rolled back: never
	recs := e.readAll(e.forward, 2)
	seen := map[string]int{}
	var first *kgo.Record
	for _, r := range recs {
		key := header(r, "txhub-message-key")
		seen[key]++
		if key == "o-1" {
			first = r
			if header(r, "traceparent") != traceparent || header(r, "tracestate") != "shop=1" {
				t.Errorf("o-1's trace headers: %v", r.Headers)
			}
			if string(r.Key) != "o-1" || string(r.Value) != `{"amount":"12.50","order_id":"o-1"}` {
				t.Errorf("o-1 forwarded as %q = %q", r.Key, r.Value)
			}
		}
	}
	if len(recs) != 2 || seen["o-1"] != 1 || seen["o-2"] != 1 {
		t.Fatalf("forwarded %v, want o-1 and o-2 once each", seen)
	}

	// a duplicate of o-1's forward, as a hub crash could cause
	p, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.brokers, ",")...), txhub.CompatibleVersions())
	if err != nil {
		t.Fatal(err)
	}
	dup := &kgo.Record{Topic: e.forward, Key: first.Key, Value: first.Value, Headers: first.Headers}
	if err := p.ProduceSync(context.Background(), dup).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p.Close()

	consume := func(group string) string {
		c := e.cmd("consumer", "-topic", e.forward, "-group", group, "-idle", "3")
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("consumer: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := consume("shipping-" + e.name); strings.Count(out, ": claimed") != 2 || strings.Count(out, ": duplicate") != 1 {
		t.Fatalf("consumer:\n%s", out)
	}
	// another group reads all three again: each a duplicate
	if out := consume("audit-" + e.name); strings.Count(out, ": claimed") != 0 || strings.Count(out, ": duplicate") != 3 {
		t.Fatalf("second consumer:\n%s", out)
	}
	if got := e.query("SELECT count(*) || '/' || count(DISTINCT order_id) FROM shipments"); got != "2/2" {
		t.Fatalf("shipments %s, want 2/2", got)
	}
}
