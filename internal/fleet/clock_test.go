package fleet

import (
	"testing"
	"time"
)

// TestSkewWindow: a node's skew is the largest of its last statuses', so
// late statuses (a put that waited for a new stream leader), which only
// make its clock read as behind, do not move it; a clock set ahead is
// seen at once, one set back once the earlier skews left the window; a
// status read twice or out of order counts once.
func TestSkewWindow(t *testing.T) {
	type read struct {
		rev  uint64
		skew time.Duration
	}
	s := time.Second
	tests := []struct {
		name  string
		reads []read
		want  time.Duration
	}{
		{"first status", []read{{1, 3 * s}}, 3 * s},
		{"one late put", []read{{1, 0}, {2, 0}, {3, -2 * s}}, 0},
		{"two late puts of three", []read{{1, -1 * s}, {2, 0}, {3, -2 * s}}, 0},
		{"a late status read again", []read{{1, 0}, {2, -2 * s}, {2, -2 * s}, {2, -2 * s}}, 0},
		{"a clock set ahead: seen at once", []read{{1, 0}, {2, 0}, {3, time.Hour}}, time.Hour},
		{"a clock set back: not before the window is through", []read{{1, 0}, {2, -time.Hour}, {3, -time.Hour}}, 0},
		{"a clock set back: seen after three statuses", []read{{1, 0}, {2, -time.Hour}, {3, -time.Hour}, {4, -time.Hour}}, -time.Hour},
		{"a clock fixed: old skews leave the window", []read{{1, time.Hour}, {2, time.Hour}, {3, time.Hour}, {4, 0}, {5, 0}, {6, 0}}, 0},
		{"bucket recreated", []read{{10, time.Hour}, {11, time.Hour}, {12, time.Hour}, {1, 0}, {2, 0}, {3, 0}}, 0},
		{"an older status read after a newer one", []read{{1, 0}, {3, 0}, {2, -s}, {3, 0}, {2, -s}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w skewWindows
			var got time.Duration
			for _, r := range tt.reads {
				got = w.add("mx1", r.rev, r.skew)
			}
			if got != tt.want {
				t.Errorf("skew %s, want %s", got, tt.want)
			}
		})
	}
	var w skewWindows
	w.add("mx1", 1, time.Hour)
	w.add("mx2", 1, 0)
	w.keep([]string{"mx2"})
	if got := w.add("mx1", 2, 0); got != 0 {
		t.Errorf("a forgotten node's old skews kept: %s", got)
	}
}
