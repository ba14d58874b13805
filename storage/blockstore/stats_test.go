package blockstore

import (
	"testing"

	"bighive/storage/vfs"
)

// TestStats: live bytes follow commits and deletions, deleted blocks'
// space is counted dead, and freeing it punches holes.
func TestStats(t *testing.T) {
	m, _ := mustOpen(t, testOptions(KindLog, vfs.Default, t.TempDir()))
	defer m.Close()
	fm := m.(*FsManager)
	if st := fm.Stats(); st.Containers != 0 || st.LiveBytes != 0 || st.HolePunches != 0 {
		t.Fatalf("empty store: %+v", st)
	}
	const n, size = 6, 10000
	var ids []BlockID
	for i := 0; i < n; i++ {
		b := writeBlock(t, m, payload(BlockID(i), size))
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.ID())
	}
	st := fm.Stats()
	if st.Containers < 1 || st.LiveBytes != n*size || st.OpenFiles < 1 {
		t.Fatalf("after %d blocks of %d bytes: %+v", n, size, st)
	}
	del := m.NewDeletionTransaction()
	for _, id := range ids[:n/2] {
		del.AddDeletedBlock(id)
	}
	if _, err := del.CommitDeletedBlocks(); err != nil {
		t.Fatal(err)
	}
	fm.Manager.(*logManager).waitBackground()
	st = fm.Stats()
	if st.LiveBytes != (n-n/2)*size || st.DeadBytes < n/2*size || st.HolePunches < 1 {
		t.Fatalf("after deleting %d blocks: %+v", n/2, st)
	}
}
