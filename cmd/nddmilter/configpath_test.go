package main

import (
	"os"
	"testing"
)

func TestResolveConfig(t *testing.T) {
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	installed := func(p string) bool { return p == installedConfig }
	none := func(string) bool { return false }
	tests := []struct {
		name    string
		flag    string
		flagSet bool
		env     map[string]string
		exists  func(string) bool
		want    string
	}{
		{name: "flag wins", flag: "/x.yaml", flagSet: true, env: map[string]string{configEnv: "/y.yaml"}, exists: installed, want: "/x.yaml"},
		{name: "empty flag selects defaults", flag: "", flagSet: true, exists: installed, want: ""},
		{name: "env", env: map[string]string{configEnv: "/y.yaml"}, exists: installed, want: "/y.yaml"},
		{name: "empty env selects defaults", env: map[string]string{configEnv: ""}, exists: installed, want: ""},
		{name: "installed file", exists: installed, want: installedConfig},
		{name: "embedded defaults", exists: none, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := resolveConfig(tt.flag, tt.flagSet, env(tt.env), tt.exists)
			if got != tt.want {
				t.Errorf("resolveConfig = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestMain keeps the tests off an installed system's configuration: with
// NDDMILTER_CONFIG set and empty, commands without --config use the
// embedded defaults, as on a machine without the package.
func TestMain(m *testing.M) {
	os.Setenv(configEnv, "")
	os.Exit(m.Run())
}
