package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// configPage is the configuration reference; TestConfigPage keeps it
// true to the code.
const configPage = "../../docs/CONFIG.md"

// TestConfigPage: docs/CONFIG.md has one table row per configuration key
// (every key of Config, with [] for the fields of a list's entries), no
// row for a key that does not exist, and each row's default is the one
// Default() gives (and config/nddmilter.yaml writes, TestExampleEqualsDefaults).
func TestConfigPage(t *testing.T) {
	b, err := os.ReadFile(configPage)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([a-z0-9_.\\[\\]]+)` \\| ([^|]*) \\|")
	page := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if _, dup := page[m[1]]; dup {
			t.Errorf("%s: key %s has two rows", configPage, m[1])
		}
		page[m[1]] = strings.TrimSpace(m[2])
	}

	keys := configKeys("", reflect.TypeOf(Config{}))
	defaults := defaultValues(t)
	for _, k := range keys {
		cell, ok := page[k]
		if !ok {
			t.Errorf("%s: no row for key %s", configPage, k)
			continue
		}
		want, hasDefault := defaults[k]
		if !hasDefault {
			continue // a field of a list's entries: no default
		}
		if got := pageValue(cell); got != want {
			t.Errorf("%s: %s: default %s, want `%s`", configPage, k, cell, want)
		}
	}
	for k := range page {
		if !slices.Contains(keys, k) {
			t.Errorf("%s: row for %s, which is not a configuration key", configPage, k)
		}
	}
}

// configKeys lists the YAML key paths of the struct type ty: a nested
// struct's keys under its own, and for a list of structs the list itself
// and its entries' keys as "list[].key".
func configKeys(prefix string, ty reflect.Type) []string {
	var keys []string
	for i := range ty.NumField() {
		f := ty.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if opts == "inline" {
			keys = append(keys, configKeys(prefix, f.Type)...)
			continue
		}
		path := prefix + name
		switch {
		case f.Type.Kind() == reflect.Struct:
			keys = append(keys, configKeys(path+".", f.Type)...)
		case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Struct:
			keys = append(keys, path)
			keys = append(keys, configKeys(path+"[].", f.Type.Elem())...)
		default:
			keys = append(keys, path)
		}
	}
	return keys
}

// defaultValues maps every key of the default configuration to its value
// as YAML writes it: "" for an empty string, [] and {} for empty lists
// and maps.
func defaultValues(t *testing.T) map[string]string {
	t.Helper()
	b, err := Default().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(prefix string, n *yaml.Node)
	walk = func(prefix string, n *yaml.Node) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			switch {
			case v.Kind == yaml.MappingNode && len(v.Content) > 0:
				walk(prefix+k+".", v)
			case v.Kind == yaml.MappingNode:
				out[prefix+k] = "{}"
			case v.Kind == yaml.SequenceNode:
				var items []string
				for _, it := range v.Content {
					items = append(items, it.Value)
				}
				out[prefix+k] = "[" + strings.Join(items, ", ") + "]"
			case v.Value == "":
				out[prefix+k] = `""`
			default:
				out[prefix+k] = v.Value
			}
		}
	}
	walk("", doc.Content[0])
	return out
}

// pageValue is the value a default cell shows: `x` and `"x"` both read as
// x, and `""` as the empty string.
func pageValue(cell string) string {
	v := strings.TrimSuffix(strings.TrimPrefix(cell, "`"), "`")
	if v == `""` {
		return v
	}
	if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
		v = v[1 : len(v)-1]
	}
	return v
}
