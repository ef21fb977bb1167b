// Package buildinfo tells which build of nddmilter is running: the
// version and commit set at link time by the package build
// (-ldflags "-X github.com/nddmilter/nddmilter/internal/buildinfo.Version=…
// -X github.com/nddmilter/nddmilter/internal/buildinfo.Commit=…"), else
// what the Go toolchain recorded in the binary (module version, VCS
// revision), and the Go version.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Version and Commit are set with -ldflags -X by release builds; empty
// means "read the toolchain's build information".
var (
	Version string
	Commit  string
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`    // release version, or the module's ("(devel)" in a checkout)
	Commit    string `json:"commit"`     // VCS revision ("+dirty" when modified), or "unknown"
	GoVersion string `json:"go_version"` // the Go release that built it
}

// Get returns the running binary's Info.
func Get() Info {
	return get(Version, Commit, debug.ReadBuildInfo)
}

func get(version, commit string, read func() (*debug.BuildInfo, bool)) Info {
	in := Info{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if bi, ok := read(); ok {
		if in.Version == "" {
			in.Version = bi.Main.Version
		}
		if in.Commit == "" {
			var rev string
			var dirty bool
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if rev != "" && dirty {
				rev += "+dirty"
			}
			in.Commit = rev
		}
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	if in.Commit == "" {
		in.Commit = "unknown"
	}
	return in
}

// Short names the build in one word for a column: the version, and for a
// build without one ("(devel)") the commit's first 12 digits instead.
func (in Info) Short() string {
	if in.Version != "(devel)" || in.Commit == "unknown" {
		return in.Version
	}
	c, dirty := strings.CutSuffix(in.Commit, "+dirty")
	if len(c) > 12 {
		c = c[:12]
	}
	if dirty {
		c += "+dirty"
	}
	return "devel-" + c
}
