package daemon

import "testing"

func TestHTTPConnBudget(t *testing.T) {
	tests := []struct {
		name                 string
		configured, sessions int
		nofile               uint64
		want                 int
	}{
		{"unknown limit", 512, 1000, 0, 512},
		{"ample", 512, 1000, 65536, 512},
		{"tight", 512, 1000, 1800, 288},
		{"too small", 512, 1000, 1024, minHTTPConns},
		{"configured below the floor", 8, 1000, 1024, 8},
	}
	for _, tt := range tests {
		if got := httpConnBudget(tt.configured, tt.sessions, tt.nofile); got != tt.want {
			t.Errorf("%s: httpConnBudget(%d, %d, %d) = %d, want %d", tt.name, tt.configured, tt.sessions, tt.nofile, got, tt.want)
		}
	}
}
