package fleet

import (
	"slices"
	"testing"
)

func TestSettingsDiffer(t *testing.T) {
	set := func(lex, revoke string) map[string]string {
		return map[string]string{"lexicon": lex, "policy.revoke": revoke}
	}
	tests := []struct {
		name  string
		nodes []Status
		want  []string
	}{
		{"agree", []Status{{Node: "mx1", Settings: set("aa", "2/0.5")}, {Node: "mx2", Settings: set("aa", "2/0.5")}}, nil},
		{"one lexicon differs", []Status{{Node: "mx1", Settings: set("aa", "2/0.5")}, {Node: "mx2", Settings: set("aa", "2/0.5")},
			{Node: "mx3", Settings: set("bb", "2/0.5")}},
			[]string{"lexicon: aa (mx1, mx2), bb (mx3)"}},
		{"a silent node and an older build are left out", []Status{{Node: "mx1", Settings: set("aa", "2/0.5")},
			{Node: "mx2", Silent: true, Settings: set("bb", "3/1")}, {Node: "mx3"}}, nil},
		{"a setting one node lacks", []Status{{Node: "mx1", Settings: set("aa", "2/0.5")},
			{Node: "mx2", Settings: map[string]string{"lexicon": "aa"}}},
			[]string{"policy.revoke: 2/0.5 (mx1), unset (mx2)"}},
		{"two settings", []Status{{Node: "mx1", Settings: set("aa", "2/0.5")}, {Node: "mx2", Settings: set("bb", "3/0.5")}},
			[]string{"lexicon: aa (mx1), bb (mx2)", "policy.revoke: 2/0.5 (mx1), 3/0.5 (mx2)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SettingsDiffer(tt.nodes); !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
