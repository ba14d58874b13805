// Package layering states Bighive's package layering as data, and its test
// checks the module's imports against it: a package imports only packages
// of its own layer or of lower ones, never a higher one. Test files may
// import upward (checkpoint's tests write through replica, for example);
// only the non-test imports of each package are checked. The test also
// checks the package table of docs/internals.md: every package of the
// module listed once, at its layer.
//
// Layers, lowest first:
//
//	0  internal/*, proto/*, storage/mutation, storage/vfs, testkit/wait, testkit/race, testkit/fastloop, testkit/ports: the plumbing
//	   servers and client share, the API definitions, the row mutations the engine logs and applies,
//	   its file seam, and the tests' poll-until helper and race-detector flag (leaves any package's
//	   tests import)
//	1  storage/blockstore, storage/wal, storage/memstore: storage primitives
//	2  storage/tablet and storage/tablet/*: one tablet's engine, TSFiles, the block cache, filters
//	3  storage/checkpoint, storage/split, storage/merge: checkpoint, compaction, recovery; the tserver side of a split and of a merge
//	4  storage/replica: the one write path of a served tablet
//	5  tserver, master, meta: the servers and the master's state machine
//	6  client: the Go client library
//	7  frontend: the Cloud Bigtable API over the client
//	8  cmd/*, tools/*, testkit/*, e2e: mains, what the CLI runs besides RPCs, test harnesses and end-to-end tests
//
// A package belongs to the layer of its longest listed prefix, so a new
// sub-package takes its parent's layer; a new top-level package, or a new
// package of the engine (storage/ has no layer of its own), must be given
// one in Layers.
//
// The harnesses of testkit (real processes, in-process servers) are on the
// top layer, so the tools and the end-to-end tests may use them and no
// package below may; tests of lower packages may, as their imports are not
// checked.
package layering

import (
	"strconv"
	"strings"
)

// Layers maps a package path (relative to the module, without "bighive/")
// or a path prefix ending in "/" to its layer.
var Layers = map[string]int{
	"internal/":        0,
	"proto/":           0,
	"proto":            0,
	"storage/mutation": 0,
	"storage/vfs":      0,

	"testkit/wait":     0,
	"testkit/race":     0,
	"testkit/fastloop": 0,
	"testkit/ports":    0,

	"storage/blockstore": 1,
	"storage/wal":        1,
	"storage/memstore":   1,

	"storage/tablet": 2,

	"storage/checkpoint": 3,
	"storage/split":      3,
	"storage/merge":      3,

	"storage/replica": 4,

	"tserver": 5,
	"master":  5,
	"meta":    5,

	"client": 6,

	"frontend": 7,

	"cmd/":     8,
	"tools/":   8,
	"testkit/": 8,
	"e2e":      8,
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
			// An importee with no layer is reported as its own violation.
			if lt, ok := LayerOf(to); ok && lt > lf {
				out = append(out, Violation{From: from, To: to,
					Why: "a lower layer must not import a higher one (layer " + strconv.Itoa(lf) + " → " + strconv.Itoa(lt) + ")"})
			}
		}
	}
	return out
}
