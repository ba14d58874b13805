// Package layering states Bighive's package layering as data, and its test
// checks the module's imports against it: a package imports only packages
// of its own layer or of lower ones, never a higher one. Test files may
// import upward (checkpoint's tests write through replica, for example);
// only the non-test imports of each package are checked.
//
// Layers, lowest first:
//
//	0  internal/* (but the four of layer 8), proto/* and testkit/wait: shared non-API code,
//	   the API definitions and the tests' poll-until helper
//	1  blockstore, wal, memstore: storage primitives
//	2  tablet and tablet/*: one tablet's engine, TSFiles, the block cache, filters
//	3  checkpoint, split, merge: checkpoint, compaction, recovery; the tserver side of a split and of a merge
//	4  replica: the one write path of a served tablet
//	5  tserver, master, meta: the servers and the master's state machine
//	6  client: the Go client library
//	7  frontend: the Cloud Bigtable API over the client
//	8  cmd/*, e2e, e2e/*, internal/cli, internal/demo, internal/bench,
//	   internal/clustertest: mains, tools and test harnesses
//
// A package belongs to the layer of its longest listed prefix, so a new
// sub-package takes its parent's layer; a new top-level package must be
// given one in Layers.
//
// Besides, the multi-process harness e2e/cluster is test infrastructure:
// only e2e and the packages listed in Exceptions import it.
package layering

import (
	"strconv"
	"strings"
)

// Layers maps a package path (relative to the module, without "bighive/")
// or a path prefix ending in "/" to its layer.
var Layers = map[string]int{
	"internal/": 0,
	"proto/":    0,
	"proto":     0,

	"testkit/wait": 0,

	"blockstore": 1,
	"wal":        1,
	"memstore":   1,

	"tablet": 2,

	"checkpoint": 3,
	"split":      3,
	"merge":      3,

	"replica": 4,

	"tserver": 5,
	"master":  5,
	"meta":    5,

	"client": 6,

	"frontend": 7,

	"cmd/":                 8,
	"e2e":                  8,
	"internal/cli":         8,
	"internal/demo":        8,
	"internal/bench":       8,
	"internal/clustertest": 8,
}

// Harness is the multi-process cluster harness, imported only by e2e
// and the Exceptions.
const Harness = "e2e/cluster"

// Exceptions are the imports the rules above would refuse, kept on
// purpose, each with its reason.
var Exceptions = map[[2]string]string{
	{"internal/demo", Harness}: "the demo tours a cluster of real OS processes, " +
		"which is what the harness starts, kills and restarts; a second process manager would drift from it",
	{"internal/bench", Harness}: "`bighive bench` without --masters starts a local cluster of real processes " +
		"so that the figures include the network and the fsyncs of real servers",
}

// LayerOf returns the layer of a module-relative package path: the layer
// of the longest entry of Layers that is the path itself or, for an entry
// ending in "/" or any entry followed by "/", a prefix of it. ok is false
// for a package no entry covers.
func LayerOf(pkg string) (layer int, ok bool) {
	best := -1
	for k, l := range Layers {
		match := pkg == k ||
			(strings.HasSuffix(k, "/") && strings.HasPrefix(pkg, k)) ||
			strings.HasPrefix(pkg, k+"/")
		if match && len(k) > best {
			best, layer, ok = len(k), l, true
		}
	}
	return layer, ok
}

// Violation is one import the layering forbids.
type Violation struct {
	From, To string
	Why      string
}

func (v Violation) String() string {
	if v.To == "" {
		return v.From + ": " + v.Why
	}
	return v.From + " imports " + v.To + ": " + v.Why
}

// Check returns the violations in imports, a map from each module-relative
// package path to the module-relative paths of the module packages it
// imports (non-test imports only).
func Check(imports map[string][]string) []Violation {
	var out []Violation
	for from, tos := range imports {
		lf, ok := LayerOf(from)
		if !ok {
			out = append(out, Violation{From: from, Why: "package has no layer: give it one in internal/layering.Layers"})
			continue
		}
		for _, to := range tos {
			if _, ok := Exceptions[[2]string{from, to}]; ok {
				continue
			}
			lt, ok := LayerOf(to)
			switch {
			case !ok:
				continue // reported as the importee's own violation
			case lt > lf:
				out = append(out, Violation{From: from, To: to,
					Why: "a lower layer must not import a higher one (layer " + strconv.Itoa(lf) + " → " + strconv.Itoa(lt) + ")"})
			case to == Harness && from != "e2e" && !strings.HasPrefix(from, "e2e/"):
				out = append(out, Violation{From: from, To: to,
					Why: "the multi-process harness is for e2e tests; list a reason in internal/layering.Exceptions to keep this import"})
			}
		}
	}
	return out
}
