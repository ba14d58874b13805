// Package ports hands out loopback TCP ports to tests that must know an
// address before the server binds it: a raft peer list, a process started
// with --listen, a server restarted on the address it had.
//
// The usual trick (listen on port 0, note the port, close) races: between
// the close and the server's bind, any process of the machine may get the
// same port, most often as the local end of an outgoing connection, which
// the kernel takes from its ephemeral range. CI runs the packages' test
// binaries in parallel, each opening hundreds of connections, and a master
// test once failed with "bind: address already in use".
//
// Invariants:
//   - A port handed out is below the kernel's ephemeral range
//     (/proc/sys/net/ipv4/ip_local_port_range), so no outgoing connection
//     takes it.
//   - A port handed out is reserved for the life of the test process by
//     an exclusive flock on a file named for it under the temporary
//     directory; every test process of the machine using this package
//     skips a reserved port. The kernel drops the lock when the process
//     exits, however it exits.
//   - A port handed out was bindable on 127.0.0.1 when it was reserved.
//   - Within one process a port is handed out once.
//
// A test that needs no address in advance listens on 127.0.0.1:0 and keeps
// the listener; this package is for the others.
package ports
