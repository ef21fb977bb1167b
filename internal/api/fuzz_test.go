package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
)

// FuzzRequest sends arbitrary requests — method, path, query and body —
// to the real handler over a real engine and Badger store: every answer
// under /v1/ is JSON with a status below 500 (an error names what is
// wrong), and nothing panics.
func FuzzRequest(f *testing.F) {
	eng, _ := newEngine(f)
	h := NewHandler(eng, Options{Token: testToken, MaxBody: 64 << 10})
	spam := spamMessage()
	f.Add(uint8(0), "/v1/reports", "kind=spam&reporter=alice", spam)
	f.Add(uint8(0), "/v1/reports", "kind=ham&reporter=bob", spam)
	f.Add(uint8(0), "/v1/reports", "kind=maybe", spam)
	f.Add(uint8(0), "/v1/check", "", spam)
	f.Add(uint8(1), "/v1/campaigns", "sort=reports&limit=5", []byte(nil))
	f.Add(uint8(1), "/v1/campaigns/1", "", []byte(nil))
	f.Add(uint8(1), "/v1/campaigns/99999999999999999999", "", []byte(nil))
	f.Add(uint8(2), "/v1/campaigns/1", "", []byte(nil))
	f.Add(uint8(0), "/v1/campaigns/1/allow", "undo=true", []byte(nil))
	f.Add(uint8(0), "/v1/check", "", []byte("\x00\xff garbage"))
	methods := []string{"POST", "GET", "DELETE", "PUT"}
	f.Fuzz(func(t *testing.T, m uint8, path, query string, body []byte) {
		u := &url.URL{Path: path, RawQuery: query}
		if path == "" || path[0] != '/' {
			u.Path = "/" + path
		}
		req, err := http.NewRequest(methods[int(m)%len(methods)], "http://localhost"+u.String(), bytes.NewReader(body))
		if err != nil {
			return // not a request an HTTP server would receive
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %s: status %d: %s", req.Method, u, w.Code, w.Body.Bytes())
		}
		// net/http itself answers paths to clean (/a/../b) with a
		// redirect and unknown paths outside /v1/ with its plain 404.
		if w.Code < 300 || w.Code >= 400 && len(u.Path) > 3 && u.Path[:4] == "/v1/" {
			var v any
			if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
				t.Fatalf("%s %s: status %d, not JSON: %q", req.Method, u, w.Code, w.Body.Bytes())
			}
		}
	})
}
