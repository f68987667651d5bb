// Package checkback answers the hub's check-back requests: an http.Handler
// that parses the request, verifies its v2 signature and timestamp, asks
// the application's resolver and writes the answer.
//
// The hub sends GET <url>?biz_id=...&message_key=...&bizID=...&messageKey=...
// with X-Txhub-Attempt and, when its checkback.secret is set,
// X-Txhub-Timestamp and X-Txhub-Signature: v2=<hex HMAC-SHA256(secret,
// "<timestamp>\n<biz_id>\n<message_key>")>. A request is accepted only with a
// valid signature whose timestamp is within the window (300 s by default)
// of the local clock, either way, so a captured request cannot be replayed
// later, nor for another message. Signatures are compared in constant
// time. See "Check-back" in docs/producers.md.
package checkback

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	txhub "github.com/txhub/txhub/clients/go"
)

// WindowDefault is how far a request's timestamp may be from the local
// clock, either way.
const WindowDefault = 300 * time.Second

// Outcome is what the producer's own database says about the transaction.
type Outcome string

// The three answers.
const (
	Committed  Outcome = "committed"
	RolledBack Outcome = "rolled_back"
	Unknown    Outcome = "unknown" // not decided yet: the hub asks again later
)

// Request is a parsed check-back request.
type Request struct {
	BizID      string
	MessageKey string
	Attempt    int    // X-Txhub-Attempt, 1-based; 0 when absent
	Timestamp  int64  // X-Txhub-Timestamp; meaningful when Signed
	Signature  string // the 64 hex digits after "v2="; "" when unsigned
}

// Signed reports whether the request carries a timestamp and signature.
func (r Request) Signed() bool { return r.Signature != "" }

// Signature is the X-Txhub-Signature header value for the three parts:
// "v2=" and 64 lowercase hex digits.
func Signature(secret []byte, timestamp int64, bizID, messageKey string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(strconv.FormatInt(timestamp, 10) + "\n" + bizID + "\n" + messageKey))
	return "v2=" + hex.EncodeToString(mac.Sum(nil))
}

// decode is one query value: percent-escapes and '+' strictly (a bad escape
// or bytes that are not UTF-8 are an error, never replaced), then the id rule.
func decode(raw, what string, limit int) (string, error) {
	v, err := url.QueryUnescape(raw)
	if err != nil {
		return "", txhub.Invalid(fmt.Sprintf("query parameter %s is malformed", what))
	}
	if !utf8.ValidString(v) {
		return "", txhub.Invalid(what + " is not valid UTF-8")
	}
	if err := txhub.CheckID(what, v, limit); err != nil {
		return "", err
	}
	return v, nil
}

// ids reads the ids from a raw query string (after '?'): biz_id and
// message_key, or the older names bizID and messageKey; other parameters
// are ignored, a name given twice must give the same value.
func ids(query string) (bizID, messageKey string, err error) {
	names := map[string]string{"biz_id": "biz_id", "bizID": "biz_id", "message_key": "message_key", "messageKey": "message_key"}
	limits := map[string]int{"biz_id": txhub.BizIDMax, "message_key": txhub.MessageKeyMax}
	found := map[string]string{}
	for _, part := range strings.Split(query, "&") {
		name, raw, eq := strings.Cut(part, "=")
		what, known := names[name]
		if !eq || !known {
			continue
		}
		v, err := decode(raw, what, limits[what])
		if err != nil {
			return "", "", err
		}
		if old, seen := found[what]; seen && old != v {
			return "", "", txhub.Invalid("query parameter " + what + " is given twice with different values")
		}
		found[what] = v
	}
	for _, what := range []string{"biz_id", "message_key"} {
		if _, ok := found[what]; !ok {
			return "", "", txhub.Invalid("not a check-back: the query has no " + what)
		}
	}
	return found["biz_id"], found["message_key"], nil
}

func number(s string, digits int, minimum int64) (int64, bool) {
	if s == "" || len(s) > digits || strings.Trim(s, "0123456789") != "" {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v >= minimum
}

func isLowerHex(s string) bool {
	return strings.Trim(s, "0123456789abcdef") == ""
}

// Parse reads a request's raw query string (after '?') and headers. It
// returns ErrInvalid for a missing or invalid id, a parameter given twice
// with different values, or a malformed header. It does not verify the
// signature (Verify does).
func Parse(rawQuery string, h http.Header) (Request, error) {
	biz, key, err := ids(rawQuery)
	if err != nil {
		return Request{}, err
	}
	req := Request{BizID: biz, MessageKey: key}
	attempt, hasAttempt := h["X-Txhub-Attempt"]
	ts, hasTS := h["X-Txhub-Timestamp"]
	sig, hasSig := h["X-Txhub-Signature"]
	if hasAttempt {
		n, ok := number(attempt[0], 9, 1)
		if !ok {
			return Request{}, txhub.Invalid("X-Txhub-Attempt is not a positive integer")
		}
		req.Attempt = int(n)
	}
	if hasTS {
		n, ok := number(ts[0], 15, 0)
		if !ok {
			return Request{}, txhub.Invalid("X-Txhub-Timestamp is not a Unix time in seconds")
		}
		req.Timestamp = n
	}
	if hasSig {
		s := sig[0]
		if len(s) != 67 || !strings.HasPrefix(s, "v2=") || !isLowerHex(s[3:]) {
			return Request{}, txhub.Invalid(`X-Txhub-Signature is not "v2=" and 64 lowercase hex digits`)
		}
		req.Signature = s[3:]
	}
	if hasTS != hasSig {
		return Request{}, txhub.Invalid("X-Txhub-Timestamp and X-Txhub-Signature come together or not at all")
	}
	return req, nil
}

// Verify returns ErrUnauthorized unless req is signed with secret and its
// timestamp is within window of now (either way); ErrInvalid for an empty
// secret.
func Verify(req Request, secret []byte, now time.Time, window time.Duration) error {
	if len(secret) == 0 {
		return txhub.Invalid("a non-empty secret is required")
	}
	if !req.Signed() {
		return &txhub.Error{Kind: txhub.ErrUnauthorized, Reason: "the request is not signed"}
	}
	skew := now.Unix() - req.Timestamp
	if skew > int64(window/time.Second) || -skew > int64(window/time.Second) {
		return &txhub.Error{Kind: txhub.ErrUnauthorized,
			Reason: fmt.Sprintf("the timestamp is %d s from now, outside the %d s window", skew, int64(window/time.Second))}
	}
	want := Signature(secret, req.Timestamp, req.BizID, req.MessageKey)[3:]
	if !hmac.Equal([]byte(want), []byte(req.Signature)) {
		return &txhub.Error{Kind: txhub.ErrUnauthorized, Reason: "wrong signature"}
	}
	return nil
}

// Resolver tells a message's outcome from the producer's own database. It
// must never answer RolledBack because a lookup failed: return an error
// instead (the hub asks again later). See "How a producer answers
// truthfully" in docs/producers.md.
type Resolver func(ctx context.Context, req Request) (Outcome, error)

// Handler is the check-back endpoint: mount it where the prepares'
// CheckbackURL points. It answers
//
//	200 {"status":"committed"|"rolled_back"|"unknown"}  the resolver's answer
//	400 {"error":...}  not a check-back (bad or missing ids or headers)
//	401 {"error":...}  a bad or missing signature, or a timestamp outside Window
//	405 {"error":...}  not a GET
//	503 {"error":...}  the resolver failed or answered something else
//
// and the hub treats everything but the 200 as an error and asks again
// later. Without a Secret, unsigned requests are answered: only for a hub
// with no checkback.secret.
type Handler struct {
	Resolve Resolver
	Secret  []byte           // the hub's checkback.secret
	Window  time.Duration    // 0: WindowDefault
	Now     func() time.Time // nil: time.Now
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	status, body := h.answer(r)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", "GET")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (h *Handler) answer(r *http.Request) (int, []byte) {
	if r.Method != http.MethodGet {
		return errorBody(http.StatusMethodNotAllowed, "a check-back is a GET")
	}
	req, err := Parse(r.URL.RawQuery, r.Header)
	if err != nil {
		return errorBody(http.StatusBadRequest, reason(err))
	}
	if len(h.Secret) > 0 {
		now, window := time.Now(), h.Window
		if h.Now != nil {
			now = h.Now()
		}
		if window <= 0 {
			window = WindowDefault
		}
		if err := Verify(req, h.Secret, now, window); err != nil {
			return errorBody(http.StatusUnauthorized, reason(err))
		}
	}
	if h.Resolve == nil {
		return errorBody(http.StatusServiceUnavailable, "no resolver")
	}
	outcome, err := h.Resolve(r.Context(), req)
	if err != nil {
		// the database is down, or the like: not a decision
		return errorBody(http.StatusServiceUnavailable, "the outcome cannot be told now; ask again later")
	}
	switch outcome {
	case Committed, RolledBack, Unknown:
		return http.StatusOK, AnswerBody(outcome)
	}
	return errorBody(http.StatusServiceUnavailable, "the resolver gave no outcome")
}

// AnswerBody is {"status":"committed"} and the like, as the other clients
// write it.
func AnswerBody(o Outcome) []byte { return []byte(`{"status":"` + string(o) + `"}`) }

func reason(err error) string {
	var e *txhub.Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return err.Error()
}

func errorBody(status int, why string) (int, []byte) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"error": why})
	return status, bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
