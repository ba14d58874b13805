package checkpoint_test

import (
	"context"
	"fmt"

	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
	"bighive/storage/tablet"
)

var testSchema = tablet.Schema{Families: map[string]tablet.FamilyPolicy{"f": {}, "g": {}, "one": {MaxVersions: 1}}}

// openEngine opens the real tablet engine over the files m names.
func openEngine(mgr blockstore.Manager, m checkpoint.TabletMeta) (*checkpoint.TabletLoad, error) {
	refs := make([]tablet.FileRef, len(m.TSFiles))
	for i, f := range m.TSFiles {
		refs[i] = tablet.FileRef{Footer: f.FooterRef()}
	}
	t, err := tablet.Open(tablet.Options{ID: m.TabletID, Schema: testSchema, Store: mgr, Files: refs, Logger: quiet})
	if err != nil {
		return nil, err
	}
	return checkpoint.NewTabletLoad(t, m.Epoch), nil
}

// readRow returns the newest visible value of every column of row, keyed
// "family:qualifier".
func readRow(t *checkpoint.TabletLoad, row []byte) (map[string]string, error) {
	r, found, err := t.Get(context.Background(), row, tablet.ReadOptions{MaxVersions: 1})
	if err != nil {
		return nil, fmt.Errorf("get %s/%q: %w", t.ID(), row, err)
	}
	out := map[string]string{}
	if !found {
		return out, nil
	}
	for _, c := range r.Cells {
		out[c.Family+":"+string(c.Qualifier)] = string(c.Value)
	}
	return out, nil
}
