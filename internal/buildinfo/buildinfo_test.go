package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestGet(t *testing.T) {
	read := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v0.3.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}}, true
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	tests := []struct {
		name            string
		version, commit string
		read            func() (*debug.BuildInfo, bool)
		want            Info
	}{
		{"link-time values win", "1.2.3", "deadbeef", read, Info{"1.2.3", "deadbeef", "go1.99"}},
		{"toolchain's", "", "", read, Info{"v0.3.0", "abc123+dirty", "go1.99"}},
		{"nothing known", "", "", none, Info{"(devel)", "unknown", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := get(tt.version, tt.commit, tt.read)
			if tt.want.GoVersion == "" {
				tt.want.GoVersion = got.GoVersion
			}
			if got != tt.want || got.GoVersion == "" {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestShort(t *testing.T) {
	tests := []struct {
		in   Info
		want string
	}{
		{Info{Version: "1.2.3", Commit: "deadbeef"}, "1.2.3"},
		{Info{Version: "(devel)", Commit: "0123456789abcdef0123"}, "devel-0123456789ab"},
		{Info{Version: "(devel)", Commit: "0123456789abcdef0123+dirty"}, "devel-0123456789ab+dirty"},
		{Info{Version: "(devel)", Commit: "abc"}, "devel-abc"},
		{Info{Version: "(devel)", Commit: "unknown"}, "(devel)"},
	}
	for _, tt := range tests {
		if got := tt.in.Short(); got != tt.want {
			t.Errorf("%+v: got %q, want %q", tt.in, got, tt.want)
		}
	}
}
