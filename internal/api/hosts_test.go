package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Red-team finding 7 (DNS rebinding): requests naming a host that is not
// served get 421 before any handler runs.
func TestHostCheck(t *testing.T) {
	c := NewHostCheck("mail.example.org:8898", []string{"NDD.Example.net."})
	tests := []struct {
		host string
		ok   bool
	}{
		{"", true},
		{"127.0.0.1:8898", true},
		{"127.0.0.1", true},
		{"[::1]:8898", true},
		{"[::1]", true},
		{"192.0.2.7:8898", true},
		{"localhost:8898", true},
		{"LOCALHOST", true},
		{"mail.example.org:8898", true},
		{"ndd.example.net", true},
		{"ndd.example.net.:8898", true},
		{"evil.example:8898", false},
		{"evil.example", false},
		{"127.0.0.1.evil.example", false},
		{"localhost.evil.example", false},
		{"mail.example.org.evil.example", false},
		{"[::1", false},
	}
	for _, tt := range tests {
		if got := c.Allowed(tt.host); got != tt.ok {
			t.Errorf("Allowed(%q) = %v, want %v", tt.host, got, tt.ok)
		}
	}
	// The wildcard listen address adds no name.
	if NewHostCheck("0.0.0.0:8898", nil).Allowed("anything.example") {
		t.Error("a wildcard listen address accepts any name")
	}
	reached := false
	h := c.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
	for _, tt := range []struct {
		host   string
		status int
	}{{"evil.example:8898", http.StatusMisdirectedRequest}, {"localhost:8898", http.StatusOK}} {
		reached = false
		r := httptest.NewRequest("GET", "/v1/campaigns", nil)
		r.Host = tt.host
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tt.status || reached != (tt.status == http.StatusOK) {
			t.Errorf("Host %s: %d (handler reached %v), want %d", tt.host, w.Code, reached, tt.status)
		}
	}
}
