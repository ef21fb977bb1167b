package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a time.Duration written in YAML as a Go duration ("2s",
// "90m", "12h") with one extension: a leading whole number of days, "30d"
// or "1d12h".
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// ParseDuration parses a Go duration with an optional leading "<n>d" day
// count ("30d"; "30day" and "30days" are read the same).
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty duration")
	}
	orig := s
	bad := func() error {
		return fmt.Errorf("invalid duration %q: want a number and a unit, e.g. 500ms, 2s, 90m, 12h, 30d or 1d12h "+
			"(units ns, us, ms, s, m, h, d = days)", orig)
	}
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.ParseUint(s[:i], 10, 16)
		if err != nil {
			return 0, bad()
		}
		days = time.Duration(n) * 24 * time.Hour
		s = s[i+1:]
		// "30day" and "30days" read as "30d".
		if strings.HasPrefix(s, "ays") {
			s = s[3:]
		} else if strings.HasPrefix(s, "ay") {
			s = s[2:]
		}
		if s == "" {
			return days, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, bad()
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %q: negative", orig)
	}
	return days + d, nil
}

// String formats d the way ParseDuration reads it, using days for whole
// days and no trailing zero units ("30d", "1d12h", "2s", "1m30s").
func (d Duration) String() string {
	v := time.Duration(d)
	if v == 0 {
		return "0s"
	}
	var b strings.Builder
	if v < 0 {
		b.WriteByte('-')
		v = -v
	}
	day := 24 * time.Hour
	if v >= day {
		fmt.Fprintf(&b, "%dd", v/day)
		v %= day
	}
	if v == 0 {
		return b.String()
	}
	if v%time.Second != 0 {
		b.WriteString(v.String())
		return b.String()
	}
	h, m, s := v/time.Hour, (v%time.Hour)/time.Minute, (v%time.Minute)/time.Second
	if h > 0 {
		fmt.Fprintf(&b, "%dh", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	if s > 0 {
		fmt.Fprintf(&b, "%ds", s)
	}
	return b.String()
}

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration such as 2s, 90m, 12h, 30d", n.Line)
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }
