package txhub_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dlclark/regexp2/v2"
	"github.com/santhosh-tekuri/jsonschema/v6"

	txhub "github.com/txhub/txhub/clients/go"
)

// root is the repository's top directory (this file is in clients/go).
func root(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func load(t testing.TB, rel string, v any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// vecInput is a vector's input: what a caller hands a library. A field
// X_base64 holds bytes that need not be UTF-8 where a string X is expected.
type vecInput struct {
	BizID              *string         `json:"biz_id"`
	BizIDBase64        *string         `json:"biz_id_base64"`
	MessageKey         *string         `json:"message_key"`
	MessageKeyBase64   *string         `json:"message_key_base64"`
	PayloadString      *string         `json:"payload_string"`
	PayloadStringB64   *string         `json:"payload_string_base64"`
	PayloadJSON        *string         `json:"payload_json"`
	PayloadBytesBase64 *string         `json:"payload_bytes_base64"`
	MaxBytes           int             `json:"max_bytes"`
	Forward            *vecForward     `json:"forward"`
	Checkback          *vecCheckback   `json:"checkback"`
	Trace              *vecTrace       `json:"trace"`
	Extra              json.RawMessage `json:"-"`
}

type vecForward struct {
	Topic     *string     `json:"topic"`
	Key       *string     `json:"key"`
	KeyBase64 *string     `json:"key_base64"`
	Headers   [][2]string `json:"headers"`
	NotBefore *string     `json:"not_before"`
	DelayMS   *int64      `json:"delay_ms"`
}

type vecCheckback struct {
	URL          *string `json:"url"`
	FirstAfterMS *int64  `json:"first_after_ms"`
}

type vecTrace struct {
	Traceparent string `json:"traceparent"`
	Tracestate  string `json:"tracestate"`
}

type envelopeVectors struct {
	Envelopes []struct {
		Name          string   `json:"name"`
		Type          string   `json:"type"`
		Input         vecInput `json:"input"`
		Encoded       string   `json:"encoded"`
		EncodedBase64 string   `json:"encoded_base64"`
		Hub           struct {
			ForwardedBase64 *string `json:"forwarded_base64"`
		} `json:"hub"`
	} `json:"envelopes"`
	InvalidInputs []struct {
		Name   string   `json:"name"`
		Type   string   `json:"type"`
		Input  vecInput `json:"input"`
		Status string   `json:"status"`
	} `json:"invalid_inputs"`
	InvalidEnvelopes []struct {
		Name     string `json:"name"`
		Envelope string `json:"envelope"`
	} `json:"invalid_envelopes"`
}

func text(t *testing.T, s, b64 *string) string {
	if s != nil {
		return *s
	}
	if b64 != nil {
		raw, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	return ""
}

func message(t *testing.T, in vecInput) *txhub.Message {
	m := &txhub.Message{
		BizID:      text(t, in.BizID, in.BizIDBase64),
		MessageKey: text(t, in.MessageKey, in.MessageKeyBase64),
	}
	switch {
	case in.PayloadBytesBase64 != nil:
		raw, err := base64.StdEncoding.DecodeString(*in.PayloadBytesBase64)
		if err != nil {
			t.Fatal(err)
		}
		m.Payload = txhub.Bytes(raw)
	case in.PayloadString != nil || in.PayloadStringB64 != nil:
		m.Payload = txhub.String(text(t, in.PayloadString, in.PayloadStringB64))
	case in.PayloadJSON != nil:
		m.Payload = txhub.JSON(*in.PayloadJSON)
	}
	if fw := in.Forward; fw != nil {
		if fw.Topic != nil {
			m.ForwardTopic = *fw.Topic
		}
		if fw.Key != nil || fw.KeyBase64 != nil {
			k := text(t, fw.Key, fw.KeyBase64)
			m.ForwardKey = &k
		}
		for _, h := range fw.Headers {
			m.ForwardHeaders = append(m.ForwardHeaders, txhub.Header{Name: h[0], Value: h[1]})
		}
		if fw.NotBefore != nil {
			m.NotBefore = *fw.NotBefore
		}
		m.DelayMS = fw.DelayMS
	}
	if cb := in.Checkback; cb != nil {
		if cb.URL != nil {
			m.CheckbackURL = *cb.URL
		}
		m.FirstAfterMS = cb.FirstAfterMS
	}
	if tr := in.Trace; tr != nil {
		m.Traceparent, m.Tracestate = tr.Traceparent, tr.Tracestate
	}
	return m
}

func TestEveryVectorEncodesToItsExactBytes(t *testing.T) {
	var v envelopeVectors
	load(t, "tests/vectors/envelopes.json", &v)
	if len(v.Envelopes) < 20 {
		t.Fatalf("only %d envelope vectors", len(v.Envelopes))
	}
	for _, vec := range v.Envelopes {
		t.Run(vec.Name, func(t *testing.T) {
			got, err := txhub.Encode(txhub.Type(vec.Type), message(t, vec.Input), 0)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := base64.StdEncoding.DecodeString(vec.EncodedBase64)
			if !bytes.Equal(got, want) || string(got) != vec.Encoded {
				t.Fatalf("encoded\n got %s\nwant %s", got, want)
			}
		})
	}
}

// What a JSON vector says the consumer gets is the compact text of the
// caller's JSON (json.Compact's), which parses back to the same value.
func TestEveryJSONVectorForwardsItsCompactText(t *testing.T) {
	var v envelopeVectors
	load(t, "tests/vectors/envelopes.json", &v)
	n := 0
	for _, vec := range v.Envelopes {
		if vec.Input.PayloadJSON == nil {
			continue
		}
		n++
		got, _ := base64.StdEncoding.DecodeString(*vec.Hub.ForwardedBase64)
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(*vec.Input.PayloadJSON)); err != nil {
			t.Fatalf("%s: %v", vec.Name, err)
		}
		if !bytes.Equal(got, compact.Bytes()) {
			t.Errorf("%s: forwarded %q, compact %q", vec.Name, got, compact.Bytes())
		}
	}
	if n < 10 {
		t.Fatalf("only %d JSON vectors", n)
	}
}

func TestEveryInvalidInputIsRefused(t *testing.T) {
	var v envelopeVectors
	load(t, "tests/vectors/envelopes.json", &v)
	if len(v.InvalidInputs) < 30 {
		t.Fatalf("only %d invalid inputs", len(v.InvalidInputs))
	}
	for _, vec := range v.InvalidInputs {
		t.Run(vec.Name, func(t *testing.T) {
			out, err := txhub.Encode(txhub.Type(vec.Type), message(t, vec.Input), vec.Input.MaxBytes)
			if err == nil {
				t.Fatalf("accepted: %s", out)
			}
			var e *txhub.Error
			if !errors.As(err, &e) || e.Status() != vec.Status || !errors.Is(err, txhub.ErrInvalid) {
				t.Fatalf("got %v (%T), want status %s", err, err, vec.Status)
			}
			if (vec.Status == "too_large") != errors.Is(err, txhub.ErrTooLarge) {
				t.Fatalf("errors.Is(ErrTooLarge) wrong for %v", err)
			}
			if len(e.Reason) < 6 {
				t.Fatalf("reason %q says nothing", e.Reason)
			}
		})
	}
}

// regexp2 in ECMAScript mode reads the schema's patterns as JSON Schema
// means them (the standard library's RE2 has no lookahead).
type ecmaRegexp struct{ re *regexp2.Regexp }

func (r ecmaRegexp) MatchString(s string) bool {
	ok, err := r.re.MatchString(s)
	return ok && err == nil
}
func (r ecmaRegexp) String() string { return r.re.String() }

func schema(t *testing.T) *jsonschema.Schema {
	c := jsonschema.NewCompiler()
	c.UseRegexpEngine(func(s string) (jsonschema.Regexp, error) {
		re, err := regexp2.Compile(s, regexp2.ECMAScript)
		if err != nil {
			return nil, err
		}
		return ecmaRegexp{re}, nil
	})
	path := filepath.Join(root(t), "schema", "envelope-v1.schema.json")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddResource("envelope-v1.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("envelope-v1.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func instance(t *testing.T, raw string) any {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestEveryVectorEnvelopePassesTheSchema(t *testing.T) {
	s := schema(t)
	var v envelopeVectors
	load(t, "tests/vectors/envelopes.json", &v)
	for _, vec := range v.Envelopes {
		if err := s.Validate(instance(t, vec.Encoded)); err != nil {
			t.Errorf("%s: %v", vec.Name, err)
		}
	}
}

func TestEveryNegativeEnvelopeFailsTheSchema(t *testing.T) {
	s := schema(t)
	var v envelopeVectors
	load(t, "tests/vectors/envelopes.json", &v)
	if len(v.InvalidEnvelopes) < 20 {
		t.Fatalf("only %d invalid envelopes", len(v.InvalidEnvelopes))
	}
	for _, vec := range v.InvalidEnvelopes {
		if s.Validate(instance(t, vec.Envelope)) == nil {
			t.Errorf("%s passes the schema: %s", vec.Name, vec.Envelope)
		}
	}
}
