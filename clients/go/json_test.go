package txhub_test

import (
	"errors"
	"strings"
	"testing"

	txhub "github.com/txhub/txhub/clients/go"
)

// The JSON payload rules beyond the shared vectors: what encoding/json
// would read differently from the C library (a lone surrogate becomes
// U+FFFD there; a huge number does not fit a float64).
func TestJSONPayloadEdges(t *testing.T) {
	cases := []struct {
		text string
		ok   bool
	}{
		{`"\ud83d\ude00"`, true},      // a pair
		{`"\uD83D\uDE00"`, true},      // a pair in capitals
		{`"\ude00\ud83d"`, false},     // reversed
		{`"\ud83dx"`, false},          // a high surrogate alone
		{`"\ud83d\n"`, false},         // ... before another escape
		{`"\ud83d\u0041"`, false},     // ... before a non-surrogate escape
		{`"x\ude00"`, false},          // a low surrogate alone
		{"\"\uFFFD\"", true},          // U+FFFD as it is
		{`"\ufffd"`, true},            // U+FFFD escaped
		{`"\\ud800"`, true},           // a backslash, then text
		{`{"\ud800":1}`, false},       // in a name
		{`{"a\u0000":1}`, false},      // NUL in a name
		{`[1e400, -0, 1E-400]`, true}, // numbers as written
		{strings.Repeat("[", 512) + strings.Repeat("]", 512), true},
		{strings.Repeat("[", 513) + strings.Repeat("]", 513), false},
		{`{"a":[{"b":"\ud800"}]}`, false}, // deep inside
		{"\"\xff\"", false},               // not UTF-8
	}
	for _, c := range cases {
		m := &txhub.Message{BizID: "b", MessageKey: "k", Payload: txhub.JSON(c.text), ForwardTopic: "t"}
		out, err := txhub.Encode(txhub.TypePrepare, m, 0)
		if c.ok && err != nil {
			t.Errorf("%.60q refused: %v", c.text, err)
		}
		if !c.ok && !errors.Is(err, txhub.ErrInvalid) {
			t.Errorf("%.60q accepted: %s", c.text, out)
		}
	}
}

func TestErrorKindsAndStatuses(t *testing.T) {
	_, err := txhub.Encode(txhub.TypePrepare, &txhub.Message{BizID: "b", MessageKey: "k",
		Payload: txhub.String(strings.Repeat("x", 100)), ForwardTopic: "t"}, 64)
	var e *txhub.Error
	if !errors.As(err, &e) || e.Status() != "too_large" || !errors.Is(err, txhub.ErrTooLarge) ||
		!errors.Is(err, txhub.ErrInvalid) || errors.Is(err, txhub.ErrKafka) || txhub.IsRetriable(err) {
		t.Fatalf("got %v", err)
	}
	if !strings.HasPrefix(err.Error(), "txhub: the envelope would be") {
		t.Fatalf("message %q", err.Error())
	}
}
