package checkback_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	txhub "github.com/txhub/txhub/clients/go"
	"github.com/txhub/txhub/clients/go/checkback"
)

type vectors struct {
	Signatures []struct {
		Name       string `json:"name"`
		Secret     string `json:"secret"`
		Timestamp  int64  `json:"timestamp"`
		BizID      string `json:"biz_id"`
		MessageKey string `json:"message_key"`
		Header     string `json:"header"`
	} `json:"signatures"`
	Queries []struct {
		Name       string `json:"name"`
		Query      string `json:"query"`
		BizID      string `json:"biz_id"`
		MessageKey string `json:"message_key"`
		Error      bool   `json:"error"`
	} `json:"queries"`
}

func load(t *testing.T) vectors {
	_, file, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "tests", "vectors", "checkback.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Signatures) < 5 || len(v.Queries) < 10 {
		t.Fatalf("too few vectors: %d signatures, %d queries", len(v.Signatures), len(v.Queries))
	}
	return v
}

func TestEverySignatureVector(t *testing.T) {
	for _, vec := range load(t).Signatures {
		t.Run(vec.Name, func(t *testing.T) {
			secret := []byte(vec.Secret)
			sig := checkback.Signature(secret, vec.Timestamp, vec.BizID, vec.MessageKey)
			if sig != vec.Header {
				t.Fatalf("got %s, want %s", sig, vec.Header)
			}
			req := checkback.Request{BizID: vec.BizID, MessageKey: vec.MessageKey, Attempt: 1,
				Timestamp: vec.Timestamp, Signature: sig[3:]}
			at := func(d int64) time.Time { return time.Unix(vec.Timestamp+d, 0) }
			for _, d := range []int64{-300, 0, 300} {
				if err := checkback.Verify(req, secret, at(d), checkback.WindowDefault); err != nil {
					t.Fatalf("at %+d s: %v", d, err)
				}
			}
			for _, d := range []int64{-301, 301} {
				if err := checkback.Verify(req, secret, at(d), checkback.WindowDefault); !errors.Is(err, txhub.ErrUnauthorized) {
					t.Fatalf("at %+d s: %v, want ErrUnauthorized", d, err)
				}
			}
		})
	}
}

func TestEveryQueryVector(t *testing.T) {
	for _, vec := range load(t).Queries {
		t.Run(vec.Name, func(t *testing.T) {
			req, err := checkback.Parse(vec.Query, http.Header{"X-Txhub-Attempt": {"1"}})
			if vec.Error {
				if !errors.Is(err, txhub.ErrInvalid) {
					t.Fatalf("got %+v, %v; want ErrInvalid", req, err)
				}
				return
			}
			if err != nil || req.BizID != vec.BizID || req.MessageKey != vec.MessageKey || req.Attempt != 1 {
				t.Fatalf("got %+v, %v", req, err)
			}
		})
	}
}

const secret = "s3cret"

var now = time.Unix(1_800_000_000, 0)

func signed(method, query string, ts int64, sig string) *http.Request {
	r := httptest.NewRequest(method, "/txhub/check?"+query, nil)
	r.Header.Set("X-Txhub-Attempt", "1")
	r.Header.Set("X-Txhub-Timestamp", strconv.FormatInt(ts, 10))
	r.Header.Set("X-Txhub-Signature", sig)
	return r
}

func serve(h *checkback.Handler, r *http.Request) (int, map[string]string) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var body map[string]string
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		body = map[string]string{"unreadable": w.Body.String()}
	}
	return w.Code, body
}

func TestHandlerAnswersEveryRequest(t *testing.T) {
	outcomes := map[string]checkback.Outcome{"o-1": checkback.Committed, "o-2": checkback.RolledBack, "o-3": checkback.Unknown}
	var asked []checkback.Request
	h := &checkback.Handler{Secret: []byte(secret), Now: func() time.Time { return now },
		Resolve: func(_ context.Context, req checkback.Request) (checkback.Outcome, error) {
			asked = append(asked, req)
			switch req.MessageKey {
			case "down":
				return "", errors.New("connection refused")
			case "odd":
				return "maybe", nil
			}
			return outcomes[req.MessageKey], nil
		}}
	ts := now.Unix()
	sig := func(key string, ts int64) string { return checkback.Signature([]byte(secret), ts, "shop", key) }
	q := func(key string) string { return "biz_id=shop&message_key=" + key + "&bizID=shop&messageKey=" + key }
	cases := []struct {
		name   string
		req    *http.Request
		status int
		answer string // the status field of a 200, or "" for an error body
	}{
		{"committed", signed("GET", q("o-1"), ts, sig("o-1", ts)), 200, "committed"},
		{"rolled back", signed("GET", q("o-2"), ts, sig("o-2", ts)), 200, "rolled_back"},
		{"unknown", signed("GET", q("o-3"), ts, sig("o-3", ts)), 200, "unknown"},
		{"old names only", signed("GET", "bizID=shop&messageKey=o-1", ts, sig("o-1", ts)), 200, "committed"},
		{"at the window's edge", signed("GET", q("o-1"), ts-300, sig("o-1", ts-300)), 200, "committed"},
		{"resolver failed", signed("GET", q("down"), ts, sig("down", ts)), 503, ""},
		{"resolver gave no outcome", signed("GET", q("odd"), ts, sig("odd", ts)), 503, ""},
		{"POST", signed("POST", q("o-1"), ts, sig("o-1", ts)), 405, ""},
		{"no ids", signed("GET", "tenant=x", ts, sig("o-1", ts)), 400, ""},
		{"ids disagree", signed("GET", "biz_id=shop&bizID=other&message_key=o-1", ts, sig("o-1", ts)), 400, ""},
		{"bad escape", signed("GET", "biz_id=%zz&message_key=o-1", ts, sig("o-1", ts)), 400, ""},
		{"control character", signed("GET", "biz_id=shop&message_key=a%0Ab", ts, sig("a\nb", ts)), 400, ""},
		{"signature not v2", signed("GET", q("o-1"), ts, "v1="+sig("o-1", ts)[3:]), 400, ""},
		{"signature in uppercase hex", signed("GET", q("o-1"), ts, "v2=F5C8AEDF7D7BED9AB4CBF910FD6A33BE4E67373FA0B4CB6E697290D49F3079CD"), 400, ""},
		{"timestamp not a number", signed("GET", q("o-1"), ts, sig("o-1", ts)), 400, ""},
		{"wrong signature", signed("GET", q("o-1"), ts, sig("o-2", ts)), 401, ""},
		{"signed with another secret", signed("GET", q("o-1"), ts, checkback.Signature([]byte("other"), ts, "shop", "o-1")), 401, ""},
		{"replayed after the window", signed("GET", q("o-1"), ts-301, sig("o-1", ts-301)), 401, ""},
		{"from the future", signed("GET", q("o-1"), ts+301, sig("o-1", ts+301)), 401, ""},
	}
	cases[14].req.Header.Set("X-Txhub-Timestamp", "17e8")
	unsigned := httptest.NewRequest("GET", "/txhub/check?"+q("o-1"), nil)
	cases = append(cases, struct {
		name   string
		req    *http.Request
		status int
		answer string
	}{"unsigned", unsigned, 401, ""})
	tsOnly := httptest.NewRequest("GET", "/txhub/check?"+q("o-1"), nil)
	tsOnly.Header.Set("X-Txhub-Timestamp", strconv.FormatInt(ts, 10))
	cases = append(cases, struct {
		name   string
		req    *http.Request
		status int
		answer string
	}{"timestamp without signature", tsOnly, 400, ""})
	badAttempt := signed("GET", q("o-1"), ts, sig("o-1", ts))
	badAttempt.Header.Set("X-Txhub-Attempt", "0")
	cases = append(cases, struct {
		name   string
		req    *http.Request
		status int
		answer string
	}{"attempt 0", badAttempt, 400, ""})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			asked = nil
			status, body := serve(h, c.req)
			if status != c.status {
				t.Fatalf("status %d, want %d (%v)", status, c.status, body)
			}
			if c.answer != "" && body["status"] != c.answer {
				t.Fatalf("answer %v, want %s", body, c.answer)
			}
			if c.answer == "" && len(body["error"]) < 6 {
				t.Fatalf("error body %v says nothing", body)
			}
			// only verified requests reach the resolver
			if reached := len(asked) > 0; reached != (status == 200 || status == 503) {
				t.Fatalf("resolver asked: %v with status %d", reached, status)
			}
		})
	}
}

func TestHandlerWithoutSecretAnswersUnsigned(t *testing.T) {
	h := &checkback.Handler{Resolve: func(_ context.Context, req checkback.Request) (checkback.Outcome, error) {
		if req.BizID != "shop" || req.MessageKey != "k+1 2" {
			t.Errorf("ids %q %q", req.BizID, req.MessageKey)
		}
		return checkback.Committed, nil
	}}
	status, body := serve(h, httptest.NewRequest("GET", "/cb?biz_id=shop&message_key=k%2B1+2", nil))
	if status != 200 || body["status"] != "committed" {
		t.Fatalf("%d %v", status, body)
	}
}

func TestVerifyRefusesAnEmptySecret(t *testing.T) {
	req := checkback.Request{BizID: "b", MessageKey: "k", Timestamp: 0, Signature: "00"}
	if err := checkback.Verify(req, nil, time.Unix(0, 0), time.Minute); !errors.Is(err, txhub.ErrInvalid) {
		t.Fatalf("got %v", err)
	}
}
