package txhub_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	txhub "github.com/txhub/txhub/clients/go"
)

func TestNewProducerRefusesBadConfig(t *testing.T) {
	cases := map[string]txhub.Config{
		"no brokers":          {},
		"bad control topic":   {Brokers: []string{"127.0.0.1:1"}, ControlTopic: "a b"},
		"max bytes too small": {Brokers: []string{"127.0.0.1:1"}, MaxBytes: 63},
		"max bytes too large": {Brokers: []string{"127.0.0.1:1"}, MaxBytes: 104857601},
		"timeout too short":   {Brokers: []string{"127.0.0.1:1"}, Timeout: time.Millisecond},
		"no idempotence": {Brokers: []string{"127.0.0.1:1"},
			Options: []kgo.Opt{kgo.DisableIdempotentWrite()}},
		"leader acks only": {Brokers: []string{"127.0.0.1:1"},
			Options: []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}},
		"cancellable in flight": {Brokers: []string{"127.0.0.1:1"},
			Options: []kgo.Opt{kgo.AllowIdempotentProduceCancellation()}},
		"transactional": {Brokers: []string{"127.0.0.1:1"},
			Options: []kgo.Opt{kgo.TransactionalID("x")}},
	}
	for name, cfg := range cases {
		p, err := txhub.NewProducer(cfg)
		if !errors.Is(err, txhub.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if p != nil {
			p.Close()
		}
	}
}

// Bad input is refused before anything is sent: the producer here has no
// broker to send to, and every call returns at once.
func TestProducerRefusesBadInputWithoutSending(t *testing.T) {
	p, err := txhub.NewProducer(txhub.Config{Brokers: []string{"127.0.0.1:1"}, ControlTopic: "ctl"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	good := txhub.Message{BizID: "shop", MessageKey: "k", Payload: txhub.String("x"), ForwardTopic: "fw"}
	bad := map[string]func() error{
		"prepare without payload": func() error {
			return p.Prepare(ctx, &txhub.Message{BizID: "shop", MessageKey: "k", ForwardTopic: "fw"})
		},
		"prepare without forward": func() error {
			return p.Prepare(ctx, &txhub.Message{BizID: "shop", MessageKey: "k", Payload: txhub.String("x")})
		},
		"forward to the control topic": func() error {
			m := good
			m.ForwardTopic = "ctl"
			return p.Prepare(ctx, &m)
		},
		"nil message":          func() error { return p.Prepare(ctx, nil) },
		"commit with empty id": func() error { return p.Commit(ctx, "", "k") },
		"rollback with a control character": func() error {
			return p.Rollback(ctx, "shop", "a\x85")
		},
		"one-shot without payload": func() error {
			return p.OneShot(ctx, &txhub.Message{BizID: "shop", MessageKey: "k", ForwardTopic: "fw"})
		},
		"send of an unknown type": func() error { return p.Send(ctx, "publish", &good, nil) },
		"send of invalid JSON": func() error {
			m := good
			m.Payload = txhub.JSON("{")
			return p.Send(ctx, txhub.TypePrepare, &m, func(error) { t.Error("called back") })
		},
		"too large": func() error {
			m := good
			m.Payload = txhub.String(strings.Repeat("x", txhub.MaxBytesDefault))
			return p.Prepare(ctx, &m)
		},
	}
	for name, call := range bad {
		start := time.Now()
		err := call()
		if !errors.Is(err, txhub.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if time.Since(start) > 5*time.Second {
			t.Errorf("%s: took %v: it waited for Kafka", name, time.Since(start))
		}
	}
}

func TestClosedProducerIsFatal(t *testing.T) {
	p, err := txhub.NewProducer(txhub.Config{Brokers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	p.Close() // twice is harmless
	if err := p.Commit(context.Background(), "shop", "k"); !errors.Is(err, txhub.ErrFatal) || txhub.IsRetriable(err) {
		t.Fatalf("got %v, want ErrFatal", err)
	}
}

// A context that ends before Kafka confirms: ErrKafka (retriable), and the
// context's own error through errors.Is.
func TestUnconfirmedIsKafkaErrorWithTheContextsCause(t *testing.T) {
	p, err := txhub.NewProducer(txhub.Config{Brokers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = p.Commit(ctx, "shop", "k")
	if !errors.Is(err, txhub.ErrKafka) || !txhub.IsRetriable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	var e *txhub.Error
	if !errors.As(err, &e) || e.Status() != "kafka" {
		t.Fatalf("got %#v", err)
	}
}

// brokers is the test broker (tests/with-services.sh sets TXHUB_BROKERS).
func brokers(t *testing.T) []string {
	b := os.Getenv("TXHUB_BROKERS")
	if b == "" {
		t.Skip("TXHUB_BROKERS is not set: run through tests/with-services.sh")
	}
	return strings.Split(b, ",")
}

// readAll reads topic from the start until idle passes with nothing new.
func readAll(t *testing.T, bs []string, topic string, want int) []*kgo.Record {
	t.Helper()
	c, err := kgo.NewClient(kgo.SeedBrokers(bs...), kgo.ConsumeTopics(topic), txhub.CompatibleVersions(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(out) < want && ctx.Err() == nil {
		f := c.PollFetches(ctx)
		f.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func TestProducerAgainstABroker(t *testing.T) {
	bs := brokers(t)
	topic := fmt.Sprintf("go.ctl.%d", time.Now().UnixNano())
	p, err := txhub.NewProducer(txhub.Config{Brokers: bs, ControlTopic: topic, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// a span context, as an instrumented service's handler would have
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("rojo=00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	traced := trace.ContextWithSpanContext(ctx, sc)

	m := &txhub.Message{BizID: "shop", MessageKey: "o-1", Payload: txhub.JSON(`{"order_id": "o-1"}`), ForwardTopic: "orders"}
	if err := p.Prepare(traced, m); err != nil {
		t.Fatal(err)
	}
	if m.Traceparent != "" {
		t.Fatal("Prepare changed the caller's message")
	}
	if err := p.Commit(ctx, "shop", "o-1"); err != nil {
		t.Fatal(err)
	}
	if err := p.Rollback(ctx, "shop", "o-2"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var sendErr error
	wg.Add(1)
	one := &txhub.Message{BizID: "shop", MessageKey: "o-3", Payload: txhub.Bytes([]byte{0, 1, 2}), ForwardTopic: "orders"}
	if err := p.Send(ctx, txhub.TypeCommit, one, func(err error) { sendErr = err; wg.Done() }); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if sendErr != nil {
		t.Fatal(sendErr)
	}

	recs := readAll(t, bs, topic, 4)
	want := []struct{ key, value string }{
		{"o-1", `{"v":1,"type":"prepare","biz_id":"shop","message_key":"o-1","payload":{"order_id":"o-1"},"forward":{"topic":"orders"},"trace":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"rojo=00f067aa0ba902b7"}}`},
		{"o-1", `{"v":1,"type":"commit","biz_id":"shop","message_key":"o-1"}`},
		{"o-2", `{"v":1,"type":"rollback","biz_id":"shop","message_key":"o-2"}`},
		{"o-3", `{"v":1,"type":"commit","biz_id":"shop","message_key":"o-3","payload_base64":"AAEC","forward":{"topic":"orders"}}`},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records on %s, want %d", len(recs), topic, len(want))
	}
	byKey := map[string][]string{}
	for _, r := range recs {
		byKey[string(r.Key)] = append(byKey[string(r.Key)], string(r.Value))
	}
	for k, vs := range byKey {
		for i, v := range vs {
			var w []string
			for _, x := range want {
				if x.key == k {
					w = append(w, x.value)
				}
			}
			if i >= len(w) || v != w[i] {
				t.Errorf("key %s, record %d:\n got %s\nwant %v", k, i, v, w)
			}
		}
	}
}
