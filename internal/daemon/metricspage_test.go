package daemon

import (
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/nddmilter/nddmilter/internal/metrics"
)

// metricsPage is the metrics reference; TestMetricsPage keeps it true.
const metricsPage = "../../docs/METRICS.md"

// TestMetricsPage: docs/METRICS.md has one table row per metric the
// daemon registers (internal/metrics and a fleet node's), none for a
// metric it does not, each row names the labels of its closed sets, and
// every value of metrics.LabelValues appears on the page, in the metric's
// row or in a list item. The types of the daemon's own metrics match.
func TestMetricsPage(t *testing.T) {
	b, err := os.ReadFile(metricsPage)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	row := regexp.MustCompile("^\\| `(nddmilter_[a-z0-9_]+)(?:\\{([a-z_,]+)\\})?` \\| ([a-z]+) \\|")
	rows := map[string]string{}
	types := map[string]string{}
	labels := map[string][]string{}
	for _, line := range strings.Split(page, "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if _, dup := rows[m[1]]; dup {
			t.Errorf("%s: two rows for %s", metricsPage, m[1])
		}
		rows[m[1]], types[m[1]] = line, m[3]
		if m[2] != "" {
			labels[m[1]] = strings.Split(m[2], ",")
		}
	}

	registered := map[string]bool{}
	for n := range registeredNames(t) {
		if !strings.HasPrefix(n, "nddmilter_") {
			continue
		}
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, s); ok && (base == "nddmilter_check_duration_seconds" || base == "nddmilter_body_bytes") {
				n = base
			}
		}
		registered[n] = true
	}
	var names []string
	for n := range registered {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, ok := rows[n]; !ok {
			t.Errorf("%s: no row for %s", metricsPage, n)
		}
	}
	for n := range rows {
		if !registered[n] {
			t.Errorf("%s: row for %s, which the daemon does not register", metricsPage, n)
		}
	}

	fams, err := metrics.New().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if got, ok := types[f.GetName()]; ok && got != strings.ToLower(f.GetType().String()) {
			t.Errorf("%s: %s is a %s, the page says %s", metricsPage, f.GetName(), strings.ToLower(f.GetType().String()), got)
		}
	}

	items := map[string]bool{}
	item := regexp.MustCompile("^- `([^`]+)`")
	code := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(page, "\n") {
		if item.MatchString(line) {
			for _, m := range code.FindAllStringSubmatch(strings.SplitN(line, ":", 2)[0], -1) {
				items[m[1]] = true
			}
		}
	}
	for name, sets := range metrics.LabelValues() {
		for label, vals := range sets {
			if !slices.Contains(labels[name], label) {
				t.Errorf("%s: the row of %s does not name its label %s", metricsPage, name, label)
			}
			for _, v := range vals {
				if !strings.Contains(rows[name], "`"+v+"`") && !items[v] {
					t.Errorf("%s: %s{%s=%q} is not documented", metricsPage, name, label, v)
				}
			}
		}
	}
}
