package checkpoint_test

import (
	"context"
	"fmt"

	"bighive/storage/blockstore"
	"bighive/storage/checkpoint"
	"bighive/storage/replica"
	"bighive/storage/tablet"
)

var testSchema = tablet.Schema{Families: map[string]tablet.FamilyPolicy{"f": {}, "g": {}, "one": {MaxVersions: 1}}}

// openLoad loads a tablet the way a tserver does: the real engine over the
// files m names, as a replica (the one object of a served tablet) at m's
// epoch, writing through log and admit. It is loading: the caller replays
// its logs into it, then calls Serve.
func openLoad(mgr blockstore.Manager, m checkpoint.TabletMeta, log replica.Log, admit replica.Admitter) (*replica.Replica, error) {
	refs := make([]tablet.FileRef, len(m.TSFiles))
	for i, f := range m.TSFiles {
		refs[i] = tablet.FileRef{Footer: f.FooterRef()}
	}
	t, err := tablet.Open(tablet.Options{ID: m.TabletID, Schema: testSchema, Store: mgr, Files: refs, Logger: quiet})
	if err != nil {
		return nil, err
	}
	return replica.New(replica.Options{ID: m.TabletID, Epoch: m.Epoch, Tablet: t, Log: log, Admit: admit, Server: "node"}), nil
}

// readRow returns the newest visible value of every column of row, keyed
// "family:qualifier".
func readRow(r *replica.Replica, row []byte) (map[string]string, error) {
	got, found, err := r.Get(context.Background(), row, tablet.ReadOptions{MaxVersions: 1})
	if err != nil {
		return nil, fmt.Errorf("get %s/%q: %w", r.ID(), row, err)
	}
	out := map[string]string{}
	if !found {
		return out, nil
	}
	for _, c := range got.Cells {
		out[c.Family+":"+string(c.Qualifier)] = string(c.Value)
	}
	return out, nil
}
