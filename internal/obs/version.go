package obs

import (
	"fmt"
	"runtime/debug"
)

// BuildInfo is what the binary knows of its own build.
type BuildInfo struct {
	Module   string // module path
	Version  string // module version ("(devel)" in a checkout build)
	Revision string // vcs revision, "" when built without VCS stamping
	Time     string // vcs commit time
	Modified bool   // the work tree had changes
	Go       string // Go version
}

// ReadBuild reads the running binary's build information.
func ReadBuild() BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return BuildInfo{Version: "unknown", Go: "unknown"}
	}
	out := BuildInfo{Module: bi.Main.Path, Version: bi.Main.Version, Go: bi.GoVersion}
	if out.Version == "" {
		out.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Revision = s.Value
		case "vcs.time":
			out.Time = s.Value
		case "vcs.modified":
			out.Modified = s.Value == "true"
		}
	}
	return out
}

// Version is the one-line version of a binary named name, as printed by
// --version and `bighive version`.
func Version(name string) string {
	b := ReadBuild()
	rev := b.Revision
	switch {
	case rev == "":
		rev = "unknown revision"
	case b.Modified:
		rev += " (modified)"
	}
	return fmt.Sprintf("%s %s, %s, %s", name, b.Version, rev, b.Go)
}
