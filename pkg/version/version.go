// Package version says which build of Lethe is running: the release stamped at build time
// and the commit the Go toolchain records.
package version

import (
	"runtime"
	"runtime/debug"
)

// Version is the release, stamped with
// -ldflags "-X github.com/lethe-erasure/lethe/pkg/version.Version=v1.2.3"; "dev" unstamped.
var Version = "dev"

// Revision is the commit, stamped like Version where the build has no VCS information
// (a container build without .git); empty: the commit the toolchain recorded, if any.
var Revision = ""

// Info is the running build.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"` // the commit, "unknown" when none was recorded
	Modified  bool   `json:"modified"` // built from a work tree with uncommitted changes
	GoVersion string `json:"go_version"`
}

// Get returns the running build.
func Get() Info {
	i := Info{Version: Version, Revision: Revision, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && i.Revision == "":
				i.Revision = s.Value
			case s.Key == "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if i.Revision == "" {
		i.Revision = "unknown"
	}
	return i
}

// String is "lethe <version> (<revision>[, modified], <go version>)".
func (i Info) String() string {
	rev := i.Revision
	if i.Modified {
		rev += ", modified"
	}
	return "lethe " + i.Version + " (" + rev + ", " + i.GoVersion + ")"
}
