package client

import "testing"

// TestMergesAreNotIdempotent: a mutation holding an AddToCell or a
// MergeToCell counts twice when applied twice, so the client must not
// retry it after a failure that may have followed its logging.
func TestMergesAreNotIdempotent(t *testing.T) {
	tests := []struct {
		name  string
		build func(m *Mutation)
		want  bool
	}{
		{"a set at a client timestamp", func(m *Mutation) { m.Set("f", "q", 1000, []byte("v")) }, true},
		{"an AddToCell", func(m *Mutation) { m.AddToCell("f", "q", 1000, 1) }, false},
		{"a MergeToCell", func(m *Mutation) { m.MergeToCell("f", "q", 1000, make([]byte, 8)) }, false},
		{"a set and an AddToCell", func(m *Mutation) { m.Set("f", "q", 1000, nil); m.AddToCell("g", "q", 1000, 1) }, false},
	}
	for _, tc := range tests {
		m := NewMutation()
		tc.build(m)
		if got := m.idempotent(); got != tc.want {
			t.Errorf("%s: idempotent %v, want %v", tc.name, got, tc.want)
		}
	}
}
