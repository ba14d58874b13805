// Package hosts turns processes of one machine into "hosts" for tests: each
// host is its own network namespace, with its own address on a bridge the
// package creates, and, when asked, its own mount namespace, in which a
// GlusterFS client mounts a shared volume. testkit/cluster runs its masters
// and tservers on hosts (cluster.Options.Hosts); TestGlusterPOSIX checks
// over such mounts the file system behaviour the storage layers rely on
// (docs/gluster.md).
//
// What it builds, all with the ip, unshare, nsenter, iptables and gluster
// commands:
//
//	Network   a bridge bh<hex> with 10.a.b.1/24 on the machine's side (the
//	          test's own connections and the GlusterFS server use it); a
//	          free /24 of 10.200.0.0–10.249.255.0 is picked at random
//	Host      a holder process (unshare --net [--mount --propagation
//	          private] sleep infinity) whose namespaces the host's
//	          processes enter with nsenter; a veth pair joins it to the
//	          bridge as eth0 with 10.a.b.N/24, and lo is up
//	Volume    a GlusterFS volume of one brick, or of several replicas
//	          (NewReplicatedVolume), each brick a directory of the caller's
//	          (created with force: bricks on the root file system); a brick
//	          can be killed and started again (StopBrick, StartBrick)
//	Mount     a glusterfs client (--no-daemon) in a host's namespaces,
//	          mounting a volume at a path inside the host's mount namespace
//	          only: the machine's own mount table never shows it
//	Cut       iptables DROP rules in a host's namespace: every packet
//	          with some addresses (Cut), or the TCP packets between an
//	          address and one port of the host (CutPort); Heal drops them
//
// Invariants:
//
//   - Nothing outlives its owner by accident. The holder, the GlusterFS
//     clients and every process started with Host.Command get Pdeathsig
//     SIGKILL, so they die with the test binary; a namespace lives only as
//     long as something in it does (a process, a lingering TCP
//     connection), so when they die the host's veth, its iptables rules and
//     its mounts go with it. Host.Close deletes the veth itself, at once. What is global — the
//     bridge, the volume, and glusterd when this package started it — is
//     removed by Close (Network.Close, Volume.Close), which the caller
//     arranges (t.Cleanup).
//   - A mount is never visible outside its host: the holder makes its mount
//     namespace private before the client mounts in it.
//   - glusterd is started only if it is not running, and then stopped,
//     with the self-heal daemons of its replicated volumes, when
//     the last Volume of any process on the machine is closed (a flock on
//     /run/bighive-glusterd.lock counts them); one that ran before is left
//     running.
//
// Requirements: root, /dev/fuse, the commands above. Available reports what
// is missing (it tries apt-get for GlusterFS once), so that tests skip with
// a message naming it.
package hosts
