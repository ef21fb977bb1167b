package fleet

import (
	"testing"
	"time"
)

// TestSkewWindow: a node's skew is the median of its last statuses', so
// one or two statuses stored late (a put that waited for a new stream
// leader) do not make its clock read as behind, while a clock that really
// changed is seen after three statuses; a status read twice counts once.
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
		{"two late puts of five", []read{{1, 0}, {2, -2 * s}, {3, 0}, {4, -3 * s}, {5, 0}}, 0},
		{"a late status read again", []read{{1, 0}, {2, 0}, {3, -2 * s}, {3, -2 * s}, {3, -2 * s}}, 0},
		{"a clock set back: seen after three", []read{{1, 0}, {2, 0}, {3, -time.Hour}, {4, -time.Hour}, {5, -time.Hour}}, -time.Hour},
		{"a clock fixed: old skews leave the window", []read{{1, time.Hour}, {2, time.Hour}, {3, time.Hour}, {4, time.Hour}, {5, time.Hour}, {6, 0}, {7, 0}, {8, 0}}, 0},
		{"bucket recreated", []read{{10, time.Hour}, {11, time.Hour}, {12, time.Hour}, {1, 0}, {2, 0}, {3, 0}}, 0},
		{"an older status read after a newer one", []read{{1, 0}, {3, 0}, {2, 0}, {3, 0}, {4, -2 * s}, {2, 0}}, 0},
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
