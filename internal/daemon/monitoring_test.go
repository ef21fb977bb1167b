package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/nddmilter/nddmilter/internal/fleet"
	"github.com/nddmilter/nddmilter/internal/metrics"
)

// registeredNames returns the names of every series the daemon's
// collectors can export (internal/metrics, and a fleet node's): each
// metric's name, with _bucket, _sum and _count for histograms.
func registeredNames(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New()
	m.Zap(func() metrics.ZapStats { return metrics.ZapStats{} }) // registered when zap is on
	names := make(map[string]bool)
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		m.Describe(ch)
		new(fleet.Node).Collector().Describe(ch)
		close(ch)
	}()
	for d := range ch {
		if sm := fq.FindStringSubmatch(d.String()); sm != nil {
			names[sm[1]] = true
		}
	}
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		names[f.GetName()] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	// Histograms without observations are not gathered: add their series.
	for _, h := range []string{"nddmilter_check_duration_seconds", "nddmilter_body_bytes"} {
		if !names[h] {
			t.Fatalf("histogram %s is not registered", h)
		}
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			names[h+s] = true
		}
	}
	return names
}

// queries returns every PromQL expression of a Grafana dashboard: the
// panels' targets (rows included) and the template variables' queries.
func queries(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (k == "expr" || k == "definition") {
				*out = append(*out, s)
				continue
			}
			queries(e, out)
		}
	case []any:
		for _, e := range x {
			queries(e, out)
		}
	}
}

// Every expression of the Grafana dashboards in contrib/grafana names
// only metrics the daemon registers, and every panel has one. The check
// lives here, where the daemon assembles its collectors.
func TestGrafanaDashboardsUseRegisteredMetrics(t *testing.T) {
	files, err := filepath.Glob("../../contrib/grafana/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboard in contrib/grafana: %v", err)
	}
	names := registeredNames(t)
	metric := regexp.MustCompile(`\b(?:nddmilter|process|go)_[a-zA-Z0-9_]+`)
	labels := regexp.MustCompile(`\{[^}]*\}`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var dash struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &dash); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range dash.Panels {
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", f, p.Title)
			}
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		var qs []string
		queries(doc, &qs)
		if len(qs) == 0 {
			t.Errorf("%s: no query", f)
		}
		for _, q := range qs {
			used := metric.FindAllString(labels.ReplaceAllString(q, ""), -1)
			if len(used) == 0 {
				t.Errorf("%s: %q names no nddmilter metric", f, q)
			}
			for _, n := range used {
				if !names[n] {
					t.Errorf("%s: %q uses %s, which the daemon does not register", f, q, n)
				}
			}
			if strings.Count(q, "(") != strings.Count(q, ")") {
				t.Errorf("%s: unbalanced parentheses in %q", f, q)
			}
		}
	}
}

// Every alerting rule of contrib/prometheus names only metrics the daemon
// registers (test/e2e/prometheus.sh runs them in Prometheus itself).
func TestAlertRulesUseRegisteredMetrics(t *testing.T) {
	b, err := os.ReadFile("../../contrib/prometheus/nddmilter-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	names := registeredNames(t)
	metric := regexp.MustCompile(`\bnddmilter_[a-zA-Z0-9_]+`)
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			used := metric.FindAllString(r.Expr, -1)
			if r.Alert == "" || len(used) == 0 {
				t.Errorf("rule %q (%q): want an alert name and an nddmilter metric", r.Alert, r.Expr)
			}
			for _, m := range used {
				if !names[m] {
					t.Errorf("alert %s uses %s, which the daemon does not register", r.Alert, m)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no rule")
	}
}

// checkLabelValues fails when a series of the exposition text carries a
// label value outside the documented set of metrics.LabelValues.
func checkLabelValues(t *testing.T, exposition string) {
	t.Helper()
	for _, bad := range undocumentedLabels(exposition) {
		t.Error(bad)
	}
}

// undocumentedLabels names every label value of the exposition text that
// is outside metrics.LabelValues' closed sets.
func undocumentedLabels(exposition string) []string {
	sets := metrics.LabelValues()
	series := regexp.MustCompile(`^(nddmilter_[a-z_]+)\{([^}]*)\}`)
	pair := regexp.MustCompile(`([a-z_]+)="((?:[^"\\]|\\.)*)"`)
	var bad []string
	for _, line := range strings.Split(exposition, "\n") {
		m := series.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, p := range pair.FindAllStringSubmatch(m[2], -1) {
			vals, closed := sets[m[1]][p[1]]
			if closed && !slices.Contains(vals, p[2]) {
				bad = append(bad, fmt.Sprintf("%s: label %s=%q is not among the documented values %v", m[1], p[1], p[2], vals))
			}
		}
	}
	return bad
}

func TestUndocumentedLabels(t *testing.T) {
	tests := []struct {
		line string
		bad  bool
	}{
		{`nddmilter_reports_total{kind="spam"} 1`, false},
		{`nddmilter_errors_total{stage="report-timeout"} 0`, false},
		{`nddmilter_fleet_applied{node="mx1"} 3`, false},
		{`nddmilter_reports_total{kind="junk"} 1`, true},
		{`nddmilter_reports_total{kind=""} 1`, true},
		{`nddmilter_milter_connections_total{streaming="true",version="9"} 1`, true},
	}
	for _, tt := range tests {
		if got := len(undocumentedLabels(tt.line)) > 0; got != tt.bad {
			t.Errorf("%s: undocumented %v, want %v", tt.line, got, tt.bad)
		}
	}
}
