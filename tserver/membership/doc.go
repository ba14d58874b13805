// Package membership is a tserver's side of its membership at the master:
// registration (incarnations), the heartbeat loop with its incremental
// reports (internal/hbdelta), the lease the replies renew, registering
// again when the master asks, and handing each reply's unassignments,
// assignments and log-split tasks to the process it keeps in the cluster.
// That process is a Host: the real tserver (package tserver), or a fake
// tserver of the master's scale tests (testkit/fleetsim), which share this
// one implementation of the protocol. A contract test
// (contract_test.go) runs the same checks against both, over a real
// master.
//
// Invariants (invariant 6 in docs/design.md, 'one tserver serves a tablet
// at a time', rests on the first three):
//   - The lease is counted from when the heartbeat whose reply renews it
//     was sent, on the monotonic clock, so it ends before the master's
//     view of it (counted from when it received the heartbeat); a renewal
//     never shortens it. The host hears of every change (LeaseChanged):
//     renewal, revocation, and expiry with nobody renewing it (a watcher
//     wakes at the expiry); while the lease does not hold the host serves
//     nothing.
//   - A reply's unassignments reach the host before the lease it carries
//     is renewed, and its assignments after: Learn, Unassign, renewal,
//     Assign, log-split tasks, in that order. An unassignment gives up a
//     tablet held at its epoch or an older one (Unassigns), never a newer
//     assignment.
//   - Told to register again (reregister), the lease is revoked and the
//     host drops every tablet before anything else happens; the next call
//     is a register as a new incarnation, and every register call after a
//     failed one is a new incarnation too: the master never revives one
//     it declared dead, and assignments come only in heartbeat replies,
//     after a register succeeded.
//   - The first heartbeat of an incarnation is full; a delta goes only on
//     the base the master acknowledged; a send_full reply is followed by a
//     full heartbeat at once (hbdelta's invariants).
//   - One heartbeat is in flight at a time, bounded by three attempt
//     timeouts; the attempt timeout follows the master's interval
//     (AttemptTimeout).
package membership
