package txhub

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestWithTraceTakesTheSpanContextWhenTheMessageHasNone(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")
	ctx := trace.ContextWithSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceState: ts}))
	m := &Message{BizID: "b", MessageKey: "k"}

	if got := withTrace(context.Background(), m); got != m {
		t.Fatal("no span: the message should be the caller's, unchanged")
	}
	got := withTrace(ctx, m)
	if got.Traceparent != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00" ||
		got.Tracestate != "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE" {
		t.Fatalf("got %q %q", got.Traceparent, got.Tracestate)
	}
	if m.Traceparent != "" {
		t.Fatal("the caller's message was changed")
	}
	own := &Message{BizID: "b", MessageKey: "k", Traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	if got := withTrace(ctx, own); got != own {
		t.Fatal("the message's own trace context should win")
	}
	if withTrace(ctx, nil) != nil {
		t.Fatal("nil in, nil out")
	}
}
