package txhub

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of envelope v1, the same as the hub's and the other clients'.
const (
	BizIDMax         = 64
	MessageKeyMax    = 255
	TopicMax         = 249
	HeadersMax       = 64
	HeaderNameMax    = 255
	URLMax           = 2048
	FirstAfterMSMax  = 2_592_000_000
	DelayMSMax       = 3_153_600_000_000 // 100 years; the hub's forward.max_delay bounds it further
	JSONDepthMax     = 512
	MaxBytesDefault  = 1_048_576
	traceStateMax    = 512
	traceMembersMax  = 32
	traceParentMax   = 512
	endOfYear9999Sec = 253_402_300_800 // 10000-01-01T00:00:00Z
)

// Type is an envelope's step.
type Type string

// The three steps.
const (
	TypePrepare  Type = "prepare"
	TypeCommit   Type = "commit" // one-shot when the message has a payload and a forward topic
	TypeRollback Type = "rollback"
)

type payloadKind uint8

const (
	payloadNone payloadKind = iota
	payloadBytes
	payloadString
	payloadJSON
)

// Payload is what the hub forwards: made by Bytes, String or JSON. The
// zero Payload is no payload (a plain commit or rollback).
type Payload struct {
	kind payloadKind
	data string
}

// Bytes is a binary payload: sent as payload_base64, forwarded as it is.
func Bytes(b []byte) Payload { return Payload{payloadBytes, string(b)} }

// String is a text payload: sent as a JSON string, forwarded as its UTF-8
// bytes ("hello" arrives as hello).
func String(s string) Payload { return Payload{payloadString, s} }

// JSON is one JSON value as text (json.Marshal's output, say): the consumer
// receives its compact text, which parses back to the same value; a JSON
// string arrives with its quotes ("hello" arrives as "hello").
func JSON[T ~string | ~[]byte](text T) Payload { return Payload{payloadJSON, string(text)} }

// IsZero reports whether p is no payload.
func (p Payload) IsZero() bool { return p.kind == payloadNone }

// Header is one forward header; Message.ForwardHeaders keeps their order.
type Header struct {
	Name, Value string
}

// Message is one message as the producer describes it. A commit or
// rollback needs only the ids. Empty strings and nil pointers are absent
// fields; ForwardKey, DelayMS and FirstAfterMS are pointers because their
// zero values mean something (an empty key, no delay, check back at once).
type Message struct {
	BizID      string
	MessageKey string
	Payload    Payload

	ForwardTopic   string
	ForwardKey     *string // nil: a null record key
	ForwardHeaders []Header
	// Delayed delivery, at most one of the two: forwarded no earlier than
	// NotBefore (an RFC 3339 time with a zone, such as
	// t.Format(time.RFC3339Nano)) or than DelayMS after the commit. The hub
	// rejects more than its forward.max_delay (default 30 days) ahead.
	NotBefore string
	DelayMS   *int64

	CheckbackURL string
	FirstAfterMS *int64 // overrides the hub's checkback.first_after_ms

	// W3C trace context, sent as the traceparent and tracestate headers of
	// the check-back request and of the forwarded record. Producer.Prepare
	// and Producer.OneShot fill them in from an OpenTelemetry span in the
	// context when they are empty.
	Traceparent string
	Tracestate  string
}

func invalidf(format string, args ...any) error {
	return &Error{Kind: ErrInvalid, Reason: fmt.Sprintf(format, args...)}
}

func isControl(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) }

// CheckID returns an ErrInvalid error unless s is 1..limit bytes of valid
// UTF-8 without control characters (C0, DEL, C1): the rule for biz_id,
// message_key and header names. what names the field in the reason.
func CheckID(what, s string, limit int) error {
	switch {
	case s == "":
		return invalidf("%s is empty", what)
	case len(s) > limit:
		return invalidf("%s is %d bytes, longer than %d", what, len(s), limit)
	case strings.IndexByte(s, 0) >= 0:
		return invalidf("%s contains a NUL byte", what)
	case !utf8.ValidString(s):
		return invalidf("%s is not valid UTF-8", what)
	case strings.IndexFunc(s, isControl) >= 0:
		return invalidf("%s contains a control character", what)
	}
	return nil
}

// ValidTopic reports whether s is a valid Kafka topic name: 1..249 of
// a-z A-Z 0-9 . _ -, not "." or "..".
func ValidTopic(s string) bool {
	if s == "" || len(s) > TopicMax || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func validURL(s string) bool {
	low := strings.ToLower(s[:min(len(s), 8)])
	skip := 0
	if strings.HasPrefix(low, "http://") {
		skip = 7
	} else if strings.HasPrefix(low, "https://") {
		skip = 8
	}
	if skip == 0 || len(s) > URLMax || len(s) == skip || s[skip] == '/' || s[skip] == '?' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// quote writes s as a JSON string with the library's escaping: '"' and
// '\' with a backslash, \b \t \n \f \r, other bytes below 0x20 as \u00xx,
// nothing else (the bytes of valid UTF-8 as they are).
func quote(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// compactJSON checks text as txhub accepts JSON (RFC 8259, no \u0000, no
// lone surrogate, at most 512 levels deep, the C library's rules) and
// returns it without the white space outside strings.
func compactJSON(text string) (string, error) {
	if !utf8.ValidString(text) {
		return "", invalidf("payload JSON is not valid UTF-8")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(text)); err != nil {
		return "", invalidf("payload JSON: invalid JSON (%v)", err)
	}
	compact := buf.String()
	dec := json.NewDecoder(strings.NewReader(compact))
	dec.UseNumber()
	depth := 0
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return compact, nil
		}
		if err != nil {
			return "", invalidf("payload JSON: invalid JSON (%v)", err)
		}
		switch t := tok.(type) {
		case json.Delim:
			if t == '[' || t == '{' {
				if depth++; depth > JSONDepthMax {
					return "", invalidf("payload JSON: JSON nested too deeply (more than %d levels)", JSONDepthMax)
				}
			} else {
				depth--
			}
		case string:
			if strings.IndexByte(t, 0) >= 0 {
				return "", invalidf(`payload JSON: a string contains \u0000, which txhub does not accept`)
			}
			// encoding/json reads a lone surrogate as U+FFFD: only then look at
			// the string's own text to tell one from a U+FFFD written there
			if strings.ContainsRune(t, utf8.RuneError) &&
				loneSurrogate(strings.TrimLeft(compact[start:dec.InputOffset()], ",:")) {
				return "", invalidf("payload JSON: a string holds a lone UTF-16 surrogate escape")
			}
		}
	}
}

// loneSurrogate reports whether lit, one valid JSON string literal, has a
// \u escape of a UTF-16 surrogate that is not half of a pair.
func loneSurrogate(lit string) bool {
	high := false // the escape before was a high surrogate
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			if high {
				return true
			}
			continue
		}
		i++
		if lit[i] != 'u' {
			if high {
				return true
			}
			continue
		}
		v, _ := strconv.ParseUint(lit[i+1:i+5], 16, 32) // valid JSON: four hex digits
		i += 4
		switch {
		case v >= 0xd800 && v < 0xdc00:
			if high {
				return true
			}
			high = true
		case v >= 0xdc00 && v < 0xe000:
			if !high {
				return true
			}
			high = false
		default:
			if high {
				return true
			}
		}
	}
	return high
}

func checkHeaders(hs []Header) error {
	if len(hs) > HeadersMax {
		return invalidf("%d forward headers, more than %d", len(hs), HeadersMax)
	}
	seen := make(map[string]bool, len(hs))
	for _, h := range hs {
		if err := CheckID("a forward header name", h.Name, HeaderNameMax); err != nil {
			return err
		}
		if strings.EqualFold(h.Name[:min(len(h.Name), 6)], "txhub-") {
			return invalidf("forward header %q uses the reserved prefix txhub-", h.Name)
		}
		if !utf8.ValidString(h.Value) {
			return invalidf("forward header %q is not valid UTF-8", h.Name)
		}
		if seen[h.Name] {
			return invalidf("forward header %q appears more than once", h.Name)
		}
		seen[h.Name] = true
	}
	return nil
}

func checkPayload(p Payload) error {
	switch p.kind {
	case payloadString:
		if !utf8.ValidString(p.data) {
			return invalidf("payload string is not valid UTF-8")
		}
		if strings.IndexByte(p.data, 0) >= 0 {
			return invalidf("payload string contains a NUL byte")
		}
	case payloadJSON:
		_, err := compactJSON(p.data)
		return err
	}
	return nil
}

func checkForward(m *Message) error {
	if m.ForwardTopic == "" {
		if m.ForwardKey != nil || len(m.ForwardHeaders) > 0 {
			return invalidf("ForwardKey or ForwardHeaders without ForwardTopic")
		}
		return nil
	}
	if !ValidTopic(m.ForwardTopic) {
		return invalidf("ForwardTopic must be a valid Kafka topic name (1..249 of a-z A-Z 0-9 . _ -)")
	}
	if strings.HasPrefix(m.ForwardTopic, "__") {
		return invalidf("ForwardTopic names a topic Kafka reserves for itself (names beginning with __, such as __consumer_offsets)")
	}
	if m.ForwardKey != nil && !utf8.ValidString(*m.ForwardKey) {
		return invalidf("ForwardKey is not valid UTF-8")
	}
	return checkHeaders(m.ForwardHeaders)
}

var rfc3339 = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(?:([Zz])|([+-])(\d{2}):(\d{2}))$`)

// CheckNotBefore returns an ErrInvalid error unless s is a time as the hub
// reads forward.not_before: RFC 3339 with a zone, years 1970 to 9999 in
// UTC (a leap second :60 allowed).
func CheckNotBefore(s string) error {
	g := rfc3339.FindStringSubmatch(s)
	if g == nil {
		return invalidf("NotBefore is not an RFC 3339 time with a zone (YYYY-MM-DDTHH:MM:SS[.fraction] then Z or +HH:MM / -HH:MM)")
	}
	n := func(i int) int { v, _ := strconv.Atoi(g[i]); return v }
	y, mo, d, h, mi, sec := n(1), n(2), n(3), n(4), n(5), n(6)
	oh, om := 0, 0
	if g[9] != "" {
		oh, om = n(10), n(11)
	}
	if h > 23 || mi > 59 || sec > 60 || oh > 23 || om > 59 {
		return invalidf("NotBefore: no such time of day or zone offset")
	}
	t := time.Date(y, time.Month(mo), d, h, mi, min(sec, 59), 0, time.UTC)
	if mo < 1 || mo > 12 || t.Day() != d || int(t.Month()) != mo {
		return invalidf("NotBefore: no such date")
	}
	sign := int64(1)
	if g[9] == "-" {
		sign = -1
	}
	secs := t.Unix() - sign*int64(oh*3600+om*60)
	if sec == 60 {
		secs++
	}
	if y == 0 || secs < 0 || secs > endOfYear9999Sec {
		return invalidf("NotBefore is out of range (years 1970 to 9999 in UTC)")
	}
	return nil
}

func checkDelay(m *Message) error {
	if m.NotBefore == "" && m.DelayMS == nil {
		return nil
	}
	if m.ForwardTopic == "" {
		return invalidf("NotBefore or DelayMS without ForwardTopic")
	}
	if m.NotBefore != "" && m.DelayMS != nil {
		return invalidf("give NotBefore or DelayMS, not both")
	}
	if m.DelayMS != nil && (*m.DelayMS < 0 || *m.DelayMS > DelayMSMax) {
		return invalidf("DelayMS must be from 0 to %d", int64(DelayMSMax))
	}
	if m.NotBefore != "" {
		return CheckNotBefore(m.NotBefore)
	}
	return nil
}

// W3C Trace Context level 1, as the hub checks it: a later version may go
// on after its flags with printable ASCII, not ending with a space.
var (
	traceparentRE = regexp.MustCompile(`^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\x20-\x7e]*)?$`)
	stateKeyRE    = regexp.MustCompile(`^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})$`)
	stateValueRE  = regexp.MustCompile(`^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$`)
)

func checkTrace(tp, ts string) error {
	if ts != "" && tp == "" {
		return invalidf("a Tracestate needs a Traceparent")
	}
	if tp != "" {
		var g []string
		if len(tp) <= traceParentMax {
			g = traceparentRE.FindStringSubmatch(tp)
		}
		if g == nil || g[1] == "ff" || strings.Trim(g[2], "0") == "" || strings.Trim(g[3], "0") == "" ||
			(g[1] == "00" && g[5] != "") || strings.HasSuffix(tp, " ") {
			return invalidf("Traceparent is not a valid W3C traceparent")
		}
	}
	if ts == "" {
		return nil
	}
	if len(ts) > traceStateMax {
		return invalidf("Tracestate is longer than %d characters", traceStateMax)
	}
	seen := map[string]bool{}
	for _, member := range strings.Split(ts, ",") {
		member = strings.Trim(member, " \t")
		if member == "" {
			continue
		}
		key, value, eq := strings.Cut(member, "=")
		if !eq || !stateKeyRE.MatchString(key) || !stateValueRE.MatchString(value) {
			return invalidf("Tracestate has a malformed member")
		}
		if seen[key] {
			return invalidf("Tracestate has the key %q twice", key)
		}
		seen[key] = true
	}
	if len(seen) > traceMembersMax {
		return invalidf("Tracestate has more than %d members", traceMembersMax)
	}
	return nil
}

// Check validates m for an envelope of type t, as Encode does.
func Check(t Type, m *Message) error {
	if t != TypePrepare && t != TypeCommit && t != TypeRollback {
		return invalidf("unknown envelope type %q", string(t))
	}
	if m == nil {
		return invalidf("no message")
	}
	if err := CheckID("biz_id", m.BizID, BizIDMax); err != nil {
		return err
	}
	if err := CheckID("message_key", m.MessageKey, MessageKeyMax); err != nil {
		return err
	}
	if t == TypeRollback {
		return nil // payload and forward are left out of a rollback
	}
	hasPayload, hasForward := !m.Payload.IsZero(), m.ForwardTopic != ""
	if t == TypePrepare && (!hasPayload || !hasForward) {
		return invalidf("a prepare needs a Payload and a ForwardTopic")
	}
	if t == TypeCommit && hasPayload != hasForward {
		return invalidf("a one-shot commit needs both a Payload and a ForwardTopic")
	}
	if err := checkPayload(m.Payload); err != nil {
		return err
	}
	if err := checkForward(m); err != nil {
		return err
	}
	if m.CheckbackURL != "" && !validURL(m.CheckbackURL) {
		return invalidf("CheckbackURL must be an http:// or https:// URL of at most %d printable ASCII characters", URLMax)
	}
	if m.FirstAfterMS != nil && (*m.FirstAfterMS < 0 || *m.FirstAfterMS > FirstAfterMSMax) {
		return invalidf("FirstAfterMS must be from 0 to %d", FirstAfterMSMax)
	}
	if err := checkDelay(m); err != nil {
		return err
	}
	return checkTrace(m.Traceparent, m.Tracestate)
}

// Encode validates m and encodes it as an envelope of type t, byte for
// byte as the C library and the Python package do (tests/vectors): the
// fields in a fixed order, each only when present, compact, with the
// escaping of quote. maxBytes is the hub's envelope.max_bytes (0: the
// default, 1 MiB). Errors are ErrInvalid, or ErrTooLarge.
func Encode(t Type, m *Message, maxBytes int) ([]byte, error) {
	if err := Check(t, m); err != nil {
		return nil, err
	}
	if maxBytes <= 0 {
		maxBytes = MaxBytesDefault
	}
	var b strings.Builder
	b.WriteString(`{"v":1,"type":"` + string(t) + `","biz_id":`)
	quote(&b, m.BizID)
	b.WriteString(`,"message_key":`)
	quote(&b, m.MessageKey)
	if t != TypeRollback {
		writePayload(&b, m.Payload)
		writeForward(&b, m)
		writeCheckback(&b, m)
		if m.Traceparent != "" {
			b.WriteString(`,"trace":{"traceparent":`)
			quote(&b, m.Traceparent)
			if m.Tracestate != "" {
				b.WriteString(`,"tracestate":`)
				quote(&b, m.Tracestate)
			}
			b.WriteByte('}')
		}
	}
	b.WriteByte('}')
	if b.Len() > maxBytes {
		return nil, &Error{Kind: ErrTooLarge, Reason: fmt.Sprintf("the envelope would be %d bytes, over max_bytes (%d)", b.Len(), maxBytes)}
	}
	return []byte(b.String()), nil
}

func writePayload(b *strings.Builder, p Payload) {
	switch p.kind {
	case payloadBytes:
		b.WriteString(`,"payload_base64":"` + base64.StdEncoding.EncodeToString([]byte(p.data)) + `"`)
	case payloadString:
		b.WriteString(`,"payload":`)
		quote(b, p.data)
	case payloadJSON:
		// The hub forwards a JSON string payload as the string's bytes, so a
		// JSON value that is a string goes as a JSON string whose content is
		// its compact text: the consumer gets "hello" with its quotes.
		text, _ := compactJSON(p.data) // checked by Check
		b.WriteString(`,"payload":`)
		if strings.HasPrefix(text, `"`) {
			quote(b, text)
		} else {
			b.WriteString(text)
		}
	}
}

func writeForward(b *strings.Builder, m *Message) {
	if m.ForwardTopic == "" {
		return
	}
	b.WriteString(`,"forward":{"topic":`)
	quote(b, m.ForwardTopic)
	if m.ForwardKey != nil {
		b.WriteString(`,"key":`)
		quote(b, *m.ForwardKey)
	}
	if len(m.ForwardHeaders) > 0 {
		b.WriteString(`,"headers":{`)
		for i, h := range m.ForwardHeaders {
			if i > 0 {
				b.WriteByte(',')
			}
			quote(b, h.Name)
			b.WriteByte(':')
			quote(b, h.Value)
		}
		b.WriteByte('}')
	}
	if m.NotBefore != "" {
		b.WriteString(`,"not_before":`)
		quote(b, m.NotBefore)
	}
	if m.DelayMS != nil {
		b.WriteString(`,"delay_ms":` + strconv.FormatInt(*m.DelayMS, 10))
	}
	b.WriteByte('}')
}

func writeCheckback(b *strings.Builder, m *Message) {
	if m.CheckbackURL == "" && m.FirstAfterMS == nil {
		return
	}
	b.WriteString(`,"checkback":{`)
	if m.CheckbackURL != "" {
		b.WriteString(`"url":`)
		quote(b, m.CheckbackURL)
		if m.FirstAfterMS != nil {
			b.WriteByte(',')
		}
	}
	if m.FirstAfterMS != nil {
		b.WriteString(`"first_after_ms":` + strconv.FormatInt(*m.FirstAfterMS, 10))
	}
	b.WriteByte('}')
}
