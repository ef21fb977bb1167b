// Package buildinfo holds the version and commit the binary was built
// from. scripts/build-package.sh sets them with -ldflags:
//
//	-X github.com/nddmilter/nddmilter/internal/buildinfo.Version=$(git describe --tags --always --dirty)
//	-X github.com/nddmilter/nddmilter/internal/buildinfo.Commit=$(git rev-parse HEAD)
//
// A plain `go build` leaves both at "unknown".
package buildinfo

// Version is the version the binary was built from (git describe).
var Version = "unknown"

// Commit is the full commit hash the binary was built from.
var Commit = "unknown"
