// Package fleetsim simulates a fleet of tservers against real masters, for
// the scale tests of the master (issue 21). It is test infrastructure:
// only tests import it and no binary links it.
//
// Masters (masters.go) are real: 3 raft masters, each on its own bbolt
// metadata and raft log, talking raft over loopback TCP and serving gRPC
// on loopback listeners. StartMasterProcs runs each as an OS process of
// the cmd/master binary, its configuration given as flags (procs.go; a
// setting the binary has no flag for fails the test instead of being
// dropped), its /metrics scraped over HTTP and its CPU and memory read
// from /proc/<pid> (procstat.go); Stop sends SIGTERM, Kill SIGKILL.
// StartMasters runs them in this process instead: Stop and Kill shut one
// down hard (its gRPC server and raft stop at once), and CPU and memory
// are the whole process's. Either way a master's files stay and Start
// brings it back on the same directory and ports; StopAndDump stops them
// all once they applied one index and dumps each meta.db, for a byte
// comparison.
//
// Fakes (fake.go) speak the tserver's side of the Master protocol and
// nothing else: no storage behind them. Each is a Host of package
// membership, the real tserver's own registration, heartbeat loop, lease
// and registering again, over one leader-following connection the fleet
// shares (internal/masterconn); the contract test of package membership
// runs the same checks against a fake and a real tserver.
//
//   - Each registers (uuid, incarnation, WAL prefix), then heartbeats at
//     the interval the master tells it (production: 1 s), starting at a
//     random phase of it, listing every tablet it holds with a size (a
//     full list first, then deltas), plus a load summary.
//   - An assignment is "loaded" by a load report carrying a log position
//     of its own prefix (so a later failover has logs to split), the
//     loads of one heartbeat reply in one ReportTabletLoads call; one
//     log file per incarnation, as a tserver whose log never rolls;
//     the tablet is serving once the master accepted it. Unassignments
//     drop tablets at once.
//   - A log-split task is answered with one recovery file per tablet it
//     names (paths only, nothing is written).
//   - A lease that ran out drops every tablet (a real tserver keeps them
//     loaded but serves none); a Reregister answer drops every tablet and
//     makes it a new incarnation.
//
// The fleet (Fleet) keeps the fleet-wide view the tests assert on: who
// serves which tablet (two fakes serving one tablet is recorded as a
// violation of the one-server invariant), the client-side latency of
// every heartbeat, and counters (reregisters, loads, log-split tasks).
// Churn kills a random fake and restarts it as a new incarnation at a
// configured rate.
//
// Every call waits under a context; the fleet's goroutines end with Close.
package fleetsim
