package meta

import (
	"bytes"

	"bighive/internal/apierr"
	"bighive/internal/auth"
	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// Grants: the grants bucket holds one key per grant and meta
// "grants_version" counts the changes (tservers compare it to know whether
// their copy is current).

func grantKey(g *pb.Grant) []byte {
	k := make([]byte, 0, len(g.Principal)+len(g.Table)+8)
	k = append(k, g.Principal...)
	k = append(k, 0)
	k = append(k, g.Table...)
	k = append(k, 0)
	return append(k, auth.RoleName(g.Role)...)
}

func parseGrantKey(k []byte) (*pb.Grant, bool) {
	p := bytes.Split(k, []byte{0})
	if len(p) != 3 {
		return nil, false
	}
	role, err := auth.ParseRole(string(p[2]))
	if err != nil {
		return nil, false
	}
	return &pb.Grant{Principal: string(p[0]), Table: string(p[1]), Role: role}, true
}

// CheckGrant validates a grant: principal, role, and a table name or ""
// (every table). The table need not exist: access may be granted before a
// table is created.
func CheckGrant(g *pb.Grant) error {
	if err := auth.ValidGrant(g); err != nil {
		return apierr.InvalidArgument("grant: %v", err)
	}
	if g.Table != "" {
		if err := limits.ValidateTableName(g.Table); err != nil {
			return apierr.InvalidArgument("grant: %v", err)
		}
	}
	return nil
}

// GrantsVersion is the version of the grants (0 before any change).
func (r *Reader) GrantsVersion() uint64 {
	v, _ := getU64(r.tx.Bucket(bucketMeta).Get(keyGrantsVersion))
	return v
}

// Grants returns every grant, in key order, with the version.
func (r *Reader) Grants() (*pb.GrantList, error) {
	out := &pb.GrantList{Version: r.GrantsVersion()}
	err := r.tx.Bucket(bucketGrants).ForEach(func(k, _ []byte) error {
		g, ok := parseGrantKey(k)
		if !ok {
			return &CorruptionError{File: r.file, Bucket: string(bucketGrants), Key: string(k), Err: errBadGrantKey}
		}
		out.Grants = append(out.Grants, g)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

var errBadGrantKey = apierr.InvalidArgument("not principal 0x00 table 0x00 role")

func (w *writer) bumpGrants() error {
	return w.tx.Bucket(bucketMeta).Put(keyGrantsVersion, u64(w.GrantsVersion()+1))
}

func (w *writer) grant(g *pb.Grant) (*Result, error) {
	if err := CheckGrant(g); err != nil {
		return nil, err
	}
	b := w.tx.Bucket(bucketGrants)
	k := grantKey(g)
	if b.Get(k) != nil {
		return &Result{}, nil
	}
	if err := b.Put(k, []byte{}); err != nil {
		return nil, apierr.Wrap(apierrInternal, err, "meta: store grant")
	}
	if err := w.bumpGrants(); err != nil {
		return nil, apierr.Wrap(apierrInternal, err, "meta: grants version")
	}
	return &Result{Applied: 1}, nil
}

func (w *writer) revoke(g *pb.Grant) (*Result, error) {
	if err := CheckGrant(g); err != nil {
		return nil, err
	}
	b := w.tx.Bucket(bucketGrants)
	k := grantKey(g)
	if b.Get(k) == nil {
		return nil, apierr.NotFound("no grant of %s", auth.GrantString(g))
	}
	if err := b.Delete(k); err != nil {
		return nil, apierr.Wrap(apierrInternal, err, "meta: delete grant")
	}
	if err := w.bumpGrants(); err != nil {
		return nil, apierr.Wrap(apierrInternal, err, "meta: grants version")
	}
	return &Result{Applied: 1}, nil
}

// bootstrapAdmin grants principal admin on every table when no grant
// exists; Applied says whether it did.
func (w *writer) bootstrapAdmin(principal string) (*Result, error) {
	if k, _ := w.tx.Bucket(bucketGrants).Cursor().First(); k != nil {
		return &Result{}, nil
	}
	return w.grant(&pb.Grant{Principal: principal, Role: auth.RoleAdmin})
}
