package blockstore

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// FindingKind classifies a start-up finding.
type FindingKind int

// Finding kinds. Fatal kinds make Open fail (see FindingKind.Fatal).
const (
	// PartialRecord: a torn record at the tail of a .metadata file (a crash
	// during an append). Repair truncates to the last whole record.
	PartialRecord FindingKind = iota
	// CorruptRecord: a record whose checksum or framing is wrong before the
	// tail, or a bad header. Fatal.
	CorruptRecord
	// MalformedRecord: a well-framed record that makes no sense (offset or
	// length outside the data file, duplicate CREATE, DELETE without
	// CREATE, unknown op). Fatal.
	MalformedRecord
	// IncompleteContainer: only one of the two files exists, or the
	// metadata is too short for its header. Repair deletes the files.
	IncompleteContainer
	// DeadContainer: a full container without live blocks. Repair removes it.
	DeadContainer
	// LowLiveContainer: a full container whose live ratio is at most
	// Options.CompactLiveRatio. Repair rewrites its metadata.
	LowLiveContainer
	// FullContainerSpace: a full container holding more disk than its live
	// bytes allow. Repair truncates the preallocated tail and re-punches
	// deleted blocks.
	FullContainerSpace
	// MisalignedBlock: a block not starting on a filesystem-block boundary
	// (informational).
	MisalignedBlock
	// TempFile: a temporary file left by an interrupted run. Repair removes it.
	TempFile
	numFindingKinds
)

var findingNames = [...]string{"partial record", "corrupt record", "malformed record",
	"incomplete container", "dead container", "low-live container",
	"full container space", "misaligned block", "temporary file"}

func (k FindingKind) String() string {
	if k >= 0 && k < numFindingKinds {
		return findingNames[k]
	}
	return fmt.Sprintf("FindingKind(%d)", int(k))
}

// Fatal reports whether findings of kind k stop Open.
func (k FindingKind) Fatal() bool { return k == CorruptRecord || k == MalformedRecord }

// Finding is one entry of a Report.
type Finding struct {
	Kind     FindingKind
	File     string
	Offset   int64 // -1 when the finding is about the whole file
	Detail   string
	Repaired bool
}

func (f Finding) String() string {
	s := fmt.Sprintf("%s: %s", f.Kind, f.File)
	if f.Offset >= 0 {
		s += fmt.Sprintf(" at offset %d", f.Offset)
	}
	if f.Detail != "" {
		s += ": " + f.Detail
	}
	if f.Repaired {
		s += " [repaired]"
	} else if f.Kind.Fatal() {
		s += " [FATAL: inspect or restore this file]"
	}
	return s
}

// Report is what start-up found and repaired. Safe for concurrent use while
// Open fills it; read it after Open returns.
type Report struct {
	mu         sync.Mutex
	Dirs       []string
	Containers int // log containers loaded
	LiveBlocks int
	LiveBytes  int64
	Findings   []Finding
}

func (r *Report) add(f Finding) {
	r.mu.Lock()
	r.Findings = append(r.Findings, f)
	r.mu.Unlock()
}

func (r *Report) markRepaired(kind FindingKind, file string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.Findings {
		if r.Findings[i].Kind == kind && r.Findings[i].File == file {
			r.Findings[i].Repaired = true
		}
	}
}

// Count returns the number of findings of kind k.
func (r *Report) Count(k FindingKind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, f := range r.Findings {
		if f.Kind == k {
			n++
		}
	}
	return n
}

// Of returns the findings of kind k.
func (r *Report) Of(k FindingKind) []Finding {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Finding
	for _, f := range r.Findings {
		if f.Kind == k {
			out = append(out, f)
		}
	}
	return out
}

// FatalError returns the first fatal finding as a *CorruptionError, or nil.
func (r *Report) FatalError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range r.Findings {
		if f.Kind.Fatal() {
			return &CorruptionError{File: f.File, Offset: f.Offset, Reason: f.Kind.String() + ": " + f.Detail}
		}
	}
	return nil
}

// String renders the report for a person: a summary line, counts per kind,
// then one line per finding with its file and offset.
func (r *Report) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "block store report for %s: %d containers, %d live blocks, %d live bytes, %d findings\n",
		strings.Join(r.Dirs, ", "), r.Containers, r.LiveBlocks, r.LiveBytes, len(r.Findings))
	counts := map[FindingKind]int{}
	for _, f := range r.Findings {
		counts[f.Kind]++
	}
	kinds := make([]FindingKind, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	for _, k := range kinds {
		fatal := ""
		if k.Fatal() {
			fatal = " (fatal)"
		}
		fmt.Fprintf(&b, "  %s%s: %d\n", k, fatal, counts[k])
	}
	fs := append([]Finding(nil), r.Findings...)
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].File != fs[j].File {
			return fs[i].File < fs[j].File
		}
		return fs[i].Offset < fs[j].Offset
	})
	for _, f := range fs {
		b.WriteString("  - " + f.String() + "\n")
	}
	return b.String()
}
