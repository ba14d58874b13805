package auth

import (
	"fmt"
	"slices"
	"strings"

	pb "bighive/proto/bighivepb"
)

// Role is a permission level; a higher role implies every lower one.
type Role = pb.Role

// The roles, lowest first. RoleNone is what a call needing only an
// authenticated caller asks for.
const (
	RoleNone  = pb.Role_ROLE_UNSPECIFIED
	RoleRead  = pb.Role_ROLE_READ
	RoleWrite = pb.Role_ROLE_WRITE
	RoleAdmin = pb.Role_ROLE_ADMIN
)

// RoleName is the role's name as the CLI and messages spell it.
func RoleName(r Role) string {
	switch r {
	case RoleRead:
		return "read"
	case RoleWrite:
		return "write"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// ParseRole parses "read", "write" or "admin".
func ParseRole(s string) (Role, error) {
	for _, r := range []Role{RoleRead, RoleWrite, RoleAdmin} {
		if strings.EqualFold(s, RoleName(r)) {
			return r, nil
		}
	}
	return RoleNone, fmt.Errorf("role %q: want read, write or admin", s)
}

// ValidGrant checks a grant's principal and role (the table is checked by
// the master, which knows table names).
func ValidGrant(g *pb.Grant) error {
	if g == nil {
		return fmt.Errorf("no grant given")
	}
	if err := ValidPrincipal(g.Principal); err != nil {
		return err
	}
	if g.Role < RoleRead || g.Role > RoleAdmin {
		return fmt.Errorf("role %d: want read, write or admin", g.Role)
	}
	return nil
}

// GrantString is "principal role on table" for messages and logs.
func GrantString(g *pb.Grant) string {
	return g.Principal + " " + RoleName(g.Role) + " on " + TableString(g.Table)
}

// TableString names a table for messages; "" is every table.
func TableString(t string) string {
	if t == "" {
		return "all tables"
	}
	return "table " + t
}

// Grants is an immutable set of grants at one version.
type Grants struct {
	version uint64
	list    []*pb.Grant
	// by principal: table ("" = all) → highest role granted there
	roles map[string]map[string]Role
}

// NewGrants builds the set of list at version.
func NewGrants(version uint64, list []*pb.Grant) *Grants {
	g := &Grants{version: version, roles: map[string]map[string]Role{}}
	for _, gr := range list {
		g.list = append(g.list, &pb.Grant{Principal: gr.Principal, Role: gr.Role, Table: gr.Table})
		m := g.roles[gr.Principal]
		if m == nil {
			m = map[string]Role{}
			g.roles[gr.Principal] = m
		}
		m[gr.Table] = max(m[gr.Table], gr.Role)
	}
	return g
}

// Version is the set's version (0 for an empty cluster).
func (g *Grants) Version() uint64 { return g.version }

// List is a copy of the grants as a GrantList.
func (g *Grants) List() *pb.GrantList {
	out := &pb.GrantList{Version: g.version}
	for _, gr := range g.list {
		out.Grants = append(out.Grants, &pb.Grant{Principal: gr.Principal, Role: gr.Role, Table: gr.Table})
	}
	return out
}

// Allows reports whether principal holds role on table: a grant of that
// role or a higher one, on table or on every table. table "" asks for
// every table: only a grant on every table gives it.
func (g *Grants) Allows(principal string, role Role, table string) bool {
	m := g.roles[principal]
	if role == RoleNone {
		return true
	}
	if m[""] >= role {
		return true
	}
	return table != "" && m[table] >= role
}

// Has reports whether the exact grant is in the set.
func (g *Grants) Has(gr *pb.Grant) bool {
	return slices.ContainsFunc(g.list, func(x *pb.Grant) bool {
		return x.Principal == gr.Principal && x.Role == gr.Role && x.Table == gr.Table
	})
}
