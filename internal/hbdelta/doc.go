// Package hbdelta builds a tserver's incremental heartbeats: which of its
// tablet reports go into the next HeartbeatRequest, and what the master
// holds once it acknowledged one (proto/bighivepb/master.proto,
// HeartbeatRequest.delta).
//
// Invariants:
//   - A delta is relative to the last heartbeat the master acknowledged
//     (HeartbeatResponse.acked_seq equal to the request's seq) and to
//     nothing else: a heartbeat whose reply was lost, or a reply that says
//     send_full, leaves no base or the older one, and the master refuses a
//     delta whose base_seq is not the one it holds (send_full).
//   - The first heartbeat of a Tracker (a new incarnation), every one after
//     send_full or a reply without acked_seq (a master that predates
//     deltas), and every FullEvery-th acknowledged one are full.
//   - A tablet goes into a delta when it is new or gone, or when something
//     the master uses changed: its epoch, whether it serves, or its size or
//     TSFile bytes by at least 1/SizeShare of the acknowledged value (and
//     at least MinSizeStep bytes), or its garbage share by GarbageStep,
//     or its TSFile entries fell by 1/SizeShare (a compaction purged
//     garbage; flushes only add entries, so this costs no report per
//     checkpoint).
//     Smaller size changes wait, at most until the next full heartbeat.
package hbdelta
