package master

import "bighive/meta"

// View reads this master's copy of the metadata in one read transaction
// (a follower's copy may lag the leader's). Tools and tests use it to
// inspect the state; it never changes anything.
func (m *Master) View(fn func(*meta.Reader) error) error { return m.view(fn) }
