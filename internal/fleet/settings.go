package fleet

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
)

// Settings.
//
// Every node signs the reports it takes and applies every node's events
// with its own lexicon, model and settings. Nodes that differ there do not
// share one campaign view: a report signed with one lexicon has keys the
// checks of a node with another never compute, and nodes that apply
// events with different revocation rules end with different states. Each
// node publishes those settings in its status (Options.Settings), and
// the nodes' differences are named in `fleet status`, /readyz and the log.

// SetSettings replaces the settings published in the node's status (a
// reload that changes the lexicon, the model or a setting).
func (n *Node) SetSettings(s map[string]string) {
	s = maps.Clone(s)
	n.settings.Store(&s)
}

func (n *Node) currentSettings() map[string]string {
	if p := n.settings.Load(); p != nil {
		return *p
	}
	return nil
}

// SettingsDiffer lists the settings the live nodes disagree on, one line
// per setting, e.g. "lexicon: 1a2b3c4d (mx1, mx2), 9f8e7d6c (mx3)". Nodes
// that publish no settings (builds before them) are left out; a setting
// a node does not publish counts as "unset".
func SettingsDiffer(nodes []Status) []string {
	var live []Status
	names := map[string]bool{}
	for _, s := range nodes {
		if s.Silent || len(s.Settings) == 0 {
			continue
		}
		live = append(live, s)
		for k := range s.Settings {
			names[k] = true
		}
	}
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(names)) {
		byValue := map[string][]string{}
		for _, s := range live {
			v, ok := s.Settings[name]
			if !ok {
				v = "unset"
			}
			byValue[v] = append(byValue[v], s.Node)
		}
		if len(byValue) < 2 {
			continue
		}
		var parts []string
		for _, v := range slices.Sorted(maps.Keys(byValue)) {
			parts = append(parts, fmt.Sprintf("%s (%s)", v, strings.Join(byValue[v], ", ")))
		}
		lines = append(lines, name+": "+strings.Join(parts, ", "))
	}
	return lines
}

// noteSettings records the settings the live nodes disagree on (from a
// read of their statuses) and logs when that changes.
func (n *Node) noteSettings(nodes []Status) {
	diff := strings.Join(SettingsDiffer(nodes), "; ")
	if old, _ := n.settingsDiff.Swap(diff).(string); old == diff {
		return
	}
	if diff == "" {
		n.log.Info("fleet: the nodes sign and apply reports with the same settings again")
		return
	}
	n.log.Warn("fleet: the nodes sign or apply reports with different settings: they do not share one campaign view until these agree",
		slog.String("differ", diff))
}

// SettingsWarning names the settings the live nodes disagree on, as last
// read; "" when they agree.
func (n *Node) SettingsWarning() string {
	diff, _ := n.settingsDiff.Load().(string)
	if diff == "" {
		return ""
	}
	return "settings differ between nodes: " + diff
}
