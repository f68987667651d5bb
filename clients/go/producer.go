package txhub

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ControlTopicDefault is the hub's default control topic.
const ControlTopicDefault = "txhub.control"

// Config configures a Producer. Only Brokers is required.
type Config struct {
	Brokers      []string      // seed brokers, host:port
	ControlTopic string        // "": txhub.control
	MaxBytes     int           // the hub's envelope.max_bytes, 64..104857600; 0: 1 MiB
	Timeout      time.Duration // how long Kafka may take to confirm an envelope, 1 s..1 h; 0: 30 s
	// Options go to franz-go after the producer's own (TLS, SASL, a
	// logger, ...). They may not turn idempotence off, allow cancelling
	// in-flight records, weaken acks or set a transactional id.
	Options []kgo.Opt
}

// Producer sends envelopes to the control topic with an idempotent
// franz-go client (acks from all in-sync replicas, no linger). Each
// envelope's record key is its message_key, so a message's prepare and
// decision land in one partition, in order. The synchronous calls return
// only once Kafka has confirmed the envelope: after Prepare returns nil,
// the prepare is stored and the local transaction may commit. Input is
// validated first; bad input returns ErrInvalid and sends nothing.
//
// A Producer is safe for concurrent use. Close it when done.
type Producer struct {
	client   *kgo.Client
	topic    string
	maxBytes int
	closed   atomic.Bool
}

// NewProducer makes a producer. It does not wait for the brokers: the
// first send does.
func NewProducer(cfg Config) (*Producer, error) {
	if len(cfg.Brokers) == 0 {
		return nil, invalidf("Config.Brokers is required")
	}
	if cfg.ControlTopic == "" {
		cfg.ControlTopic = ControlTopicDefault
	}
	if !ValidTopic(cfg.ControlTopic) {
		return nil, invalidf("Config.ControlTopic is not a valid Kafka topic name")
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = MaxBytesDefault
	}
	if cfg.MaxBytes < 64 || cfg.MaxBytes > 104857600 {
		return nil, invalidf("Config.MaxBytes must be from 64 to 104857600, as the hub's envelope.max_bytes")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Timeout < time.Second || cfg.Timeout > time.Hour {
		return nil, invalidf("Config.Timeout must be from 1 s to 1 h")
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.DefaultProduceTopic(cfg.ControlTopic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(cfg.Timeout),
		kgo.ProducerBatchMaxBytes(int32(max(1000000, cfg.MaxBytes+4096))),
		kgo.ClientID("txhub-producer"),
		// as librdkafka's producers (the C and Python clients) do
		kgo.AllowAutoTopicCreation(),
		CompatibleVersions(),
	}
	client, err := kgo.NewClient(append(opts, cfg.Options...)...)
	if err != nil {
		return nil, &Error{Kind: ErrInvalid, Reason: "cannot create the Kafka client", Err: err}
	}
	if reason := weakened(client); reason != "" {
		client.Close()
		return nil, invalidf("Config.Options: %s", reason)
	}
	return &Producer{client: client, topic: cfg.ControlTopic, maxBytes: cfg.MaxBytes}, nil
}

// CompatibleVersions is the franz-go option the producer starts with: the
// Kafka protocol as franz-go negotiates it, but a few requests at versions
// that the mock clusters of librdkafka 2.0.2 (Debian 12's) and 2.15.0
// read, so that franz-go works with txhub devbroker: ApiVersions at 2 (v3
// is answered in a form franz-go cannot read), ListOffsets at 3 (a
// consumer group's v5 gets UNKNOWN_SERVER_ERROR), JoinGroup at 5 and
// SyncGroup at 3 (2.15.0's closes the connection on JoinGroup v6). What it
// costs on a real broker: the client's software name in the brokers'
// metrics, and for a consumer the leader epoch check of ListOffsets; a
// producer sends none of the others. Give it to your own franz-go
// consumers that read from txhub devbroker.
func CompatibleVersions() kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(18, 2) // ApiVersions
	v.SetMaxKeyVersion(2, 3)  // ListOffsets
	v.SetMaxKeyVersion(11, 5) // JoinGroup
	v.SetMaxKeyVersion(14, 3) // SyncGroup
	return kgo.MaxVersions(v)
}

// weakened names an option that would break the delivery guarantee.
func weakened(c *kgo.Client) string {
	if v, _ := c.OptValue(kgo.DisableIdempotentWrite).(bool); v {
		return "the producer must stay idempotent (DisableIdempotentWrite)"
	}
	if v, _ := c.OptValue(kgo.AllowIdempotentProduceCancellation).(bool); v {
		return "in-flight envelopes may not be cancelled (AllowIdempotentProduceCancellation)"
	}
	if v, ok := c.OptValue(kgo.RequiredAcks).(kgo.Acks); !ok || v != kgo.AllISRAcks() {
		return "envelopes need acks from all in-sync replicas (RequiredAcks)"
	}
	if v, _ := c.OptValue(kgo.TransactionalID).(string); v != "" {
		return "the producer is not transactional (TransactionalID)"
	}
	return ""
}

// ControlTopic is the topic the producer writes to.
func (p *Producer) ControlTopic() string { return p.topic }

// outcome turns franz-go's result into the module's error.
func (p *Producer) outcome(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, kgo.ErrClientClosed):
		return &Error{Kind: ErrFatal, Reason: "the producer is closed", Err: err}
	default:
		// a time-out, a cancelled context, a broker error: the envelope
		// may or may not have arrived, and sending it again is safe
		return &Error{Kind: ErrKafka, Reason: "not confirmed by Kafka", Retriable: true, Err: err}
	}
}

func (p *Producer) record(t Type, m *Message) (*kgo.Record, error) {
	value, err := Encode(t, m, p.maxBytes)
	if err != nil {
		return nil, err
	}
	if t != TypeRollback && m.ForwardTopic == p.topic {
		return nil, invalidf("ForwardTopic is the control topic: the hub would read its own output")
	}
	if p.closed.Load() {
		return nil, &Error{Kind: ErrFatal, Reason: "the producer is closed"}
	}
	return &kgo.Record{Topic: p.topic, Key: []byte(m.MessageKey), Value: value}, nil
}

func (p *Producer) sendSync(ctx context.Context, t Type, m *Message) error {
	rec, err := p.record(t, m)
	if err != nil {
		return err
	}
	return p.outcome(p.client.ProduceSync(ctx, rec).FirstErr())
}

// Prepare sends a prepare (m needs a Payload and a ForwardTopic) and waits
// until Kafka has it. With no Traceparent in m, the trace context is taken
// from an OpenTelemetry span in ctx, if there is one.
func (p *Producer) Prepare(ctx context.Context, m *Message) error {
	return p.sendSync(ctx, TypePrepare, withTrace(ctx, m))
}

// Commit sends the commit of a prepared message and waits until Kafka has it.
func (p *Producer) Commit(ctx context.Context, bizID, messageKey string) error {
	return p.sendSync(ctx, TypeCommit, &Message{BizID: bizID, MessageKey: messageKey})
}

// Rollback sends the rollback of a prepared message and waits until Kafka
// has it.
func (p *Producer) Rollback(ctx context.Context, bizID, messageKey string) error {
	return p.sendSync(ctx, TypeRollback, &Message{BizID: bizID, MessageKey: messageKey})
}

// OneShot sends a commit carrying payload and forward: stored and
// forwarded as if prepare and commit had both arrived. For a message with
// no local transaction to wait for. The trace context as in Prepare.
func (p *Producer) OneShot(ctx context.Context, m *Message) error {
	if m != nil && m.Payload.IsZero() {
		return invalidf("a one-shot commit needs a Payload and a ForwardTopic")
	}
	return p.sendSync(ctx, TypeCommit, withTrace(ctx, m))
}

// Send is the asynchronous form: it validates and queues the envelope
// (waiting, within ctx, while franz-go's buffer is full) and returns. done
// is then called once, on a franz-go goroutine, with nil when Kafka
// confirmed the envelope, or the error. When Send returns an error,
// nothing was queued and done is never called. A prepare or one-shot
// commit takes its trace context from ctx as Prepare does.
func (p *Producer) Send(ctx context.Context, t Type, m *Message, done func(error)) error {
	if t != TypeRollback && !(t == TypeCommit && m != nil && m.Payload.IsZero()) {
		m = withTrace(ctx, m)
	}
	rec, err := p.record(t, m)
	if err != nil {
		return err
	}
	p.client.Produce(ctx, rec, func(_ *kgo.Record, err error) {
		if done != nil {
			done(p.outcome(err))
		}
	})
	return nil
}

// Flush waits until every envelope queued by Send is confirmed or failed;
// ErrKafka when ctx ends first.
func (p *Producer) Flush(ctx context.Context) error {
	if err := p.client.Flush(ctx); err != nil {
		return &Error{Kind: ErrKafka, Reason: "envelopes still unconfirmed", Retriable: true, Err: err}
	}
	return nil
}

// Close flushes (up to 5 s) and closes the Kafka client. Calls after Close
// return ErrFatal.
func (p *Producer) Close() {
	if p.closed.Swap(true) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.client.Flush(ctx) // what is still unconfirmed fails with ErrFatal below
	p.client.Close()
}

// withTrace returns m with the trace context of the OpenTelemetry span in
// ctx, when m has none of its own and ctx has a valid span context. A
// tracestate txhub would drop is left out, never a reason to fail.
func withTrace(ctx context.Context, m *Message) *Message {
	if m == nil || m.Traceparent != "" || !trace.SpanContextFromContext(ctx).IsValid() {
		return m
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	tp, ts := carrier.Get("traceparent"), carrier.Get("tracestate")
	if checkTrace(tp, ts) != nil {
		ts = ""
		if checkTrace(tp, "") != nil {
			return m
		}
	}
	c := *m
	c.Traceparent, c.Tracestate = tp, ts
	return &c
}

// String describes the producer for logs.
func (p *Producer) String() string { return fmt.Sprintf("txhub.Producer(%s)", p.topic) }
