package tablet

import "time"

// GCKind is the kind of a GCRule node.
type GCKind int

// Kinds of GC rules, as Cloud Bigtable's GcRule.
const (
	// GCNone keeps every cell.
	GCNone GCKind = iota
	// GCMaxVersions: the cell is garbage if it is not among the newest N
	// live versions of its column.
	GCMaxVersions
	// GCMaxAge: the cell is garbage if its timestamp is older than now
	// minus MaxAge.
	GCMaxAge
	// GCUnion: garbage if any sub-rule says so (an empty union keeps all).
	GCUnion
	// GCIntersection: garbage if every sub-rule says so (an empty
	// intersection keeps all).
	GCIntersection
)

// GCRule is a column family's garbage-collection rule, nested to any
// depth. Cells it calls garbage are never returned by reads and are dropped
// by major compactions. The zero value keeps every cell.
type GCRule struct {
	Kind        GCKind
	MaxVersions int
	MaxAge      time.Duration
	Rules       []GCRule
}

// garbage reports whether a cell is garbage: version is its 1-based rank
// among the live versions of its column (newest first), ts its timestamp,
// now the evaluation time (microseconds).
func (g *GCRule) garbage(version int, ts, now int64) bool {
	switch g.Kind {
	case GCMaxVersions:
		return g.MaxVersions > 0 && version > g.MaxVersions
	case GCMaxAge:
		return g.MaxAge > 0 && ts < now-g.MaxAge.Microseconds()
	case GCUnion:
		for i := range g.Rules {
			if g.Rules[i].garbage(version, ts, now) {
				return true
			}
		}
		return false
	case GCIntersection:
		if len(g.Rules) == 0 {
			return false
		}
		for i := range g.Rules {
			if !g.Rules[i].garbage(version, ts, now) {
				return false
			}
		}
		return true
	}
	return false
}

// garbage applies the family's effective rule: Rule when set, else the
// union of MaxVersions and MaxAge (each when non-zero).
func (p *FamilyPolicy) garbage(version int, ts, now int64) bool {
	if p.Rule != nil {
		return p.Rule.garbage(version, ts, now)
	}
	return (p.MaxVersions > 0 && version > p.MaxVersions) ||
		(p.MaxAge > 0 && ts < now-p.MaxAge.Microseconds())
}
