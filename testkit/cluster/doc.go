// Package cluster runs a real Bighive cluster — masters and tservers as OS
// processes on loopback ports — for end-to-end tests, benchmarks and
// tools. It is an ordinary (non-test) package so any test binary, and the
// CLI, can import it.
//
// Start gets the master, tserver and frontend binaries from Binaries, the
// one function that decides where they come from: $BIGHIVE_BIN_DIR when it
// is set; inside a checkout of the bighive module (the default for tests,
// `bighive demo` and `bighive bench`), go build of ./cmd/<name> once per
// process (using the build cache; the binaries live in
// $TMPDIR/bighive-e2e-bin-<uid>-<hash of the checkout's path>/ and are
// replaced atomically, so parallel test binaries of one checkout share them
// safely); otherwise beside the running
// executable, then on PATH. A missing binary is an error naming it, the
// places searched and how to provide it. Start then picks free loopback
// ports and starts the processes with their output in the caller's
// directory:
//
//	<Dir>/m1.log, m2.log, …     each master's stdout and stderr (appended across restarts)
//	<Dir>/m1/                   each master's --data directory
//	<Dir>/ts0.log, ts1.log, …   each tserver's stdout and stderr
//	<Dir>/root/                 the shared --fs-root of every tserver
//	<Dir>/ts0/data0/            each tserver's --fs-data-dirs
//	<Dir>/frontend.log          the frontend's output: it serves the Cloud
//	                            Bigtable API on BigtableAddr, always started
//	<Dir>/tls/                  with Options.TLS: ca.crt, and NAME.crt and
//	                            NAME.key of each process and of "client"
//
// A process keeps its address and its directories across Kill/Stop and
// Restart, so a restarted tserver sees its own data. Close stops every
// process and leaves Dir (and the logs) in place. New, for tests, puts Dir
// in t.TempDir, prints the tail of every log when the test failed and
// closes the cluster in t.Cleanup.
//
// Processes are started with Pdeathsig SIGKILL, so they die with the test
// binary instead of lingering on their ports.
//
// With Options.Hosts every master and tserver runs on a host of its own
// (package testkit/hosts): its own network namespace with an address on a
// bridge, fixed ports 7000 (gRPC), 7001 (raft) and 7002 (HTTP) on it, and,
// for a tserver, its own mount namespace. With HostsOptions.Gluster the
// tservers' --fs-root and data directories are on a GlusterFS volume
// (brick <Dir>/brick/; with HostsOptions.Replicas N, N replicas, the
// others <Dir>/brick1/ …) that each tserver host mounts with a client of its
// own at <Dir>/shared/ (its log <Dir>/tsN.glusterfs.log); the machine
// itself never mounts it, and RootDir names the root in the brick. The
// frontend and the caller stay on the machine and reach the hosts through
// the bridge. Close tears the hosts, the bridge and the volume down after
// the processes; a host can be cut from the masters (CutTServerFromMasters)
// or from its clients only (CutTServerFromClients), a master from the
// other masters (CutMasterFromMasters), a tserver host can crash whole
// (KillTServerHost), and a brick stop (Volume().StopBrick).
package cluster
