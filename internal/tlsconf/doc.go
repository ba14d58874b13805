// Package tlsconf is Bighive's transport security: it loads the
// --tls-cert, --tls-key and --tls-ca files, builds the TLS configurations
// of every listener and every outgoing connection (gRPC, the HTTP status
// port, the raft transport), reloads the files when they change, and
// tells a gRPC handler who its peer is.
//
// Invariants:
//
//   - TLS 1.3 only, on both sides; an older client is refused in the
//     handshake.
//   - Every outgoing connection verifies its peer's chain against the CA
//     file and the peer's host name (or IP) against the certificate's
//     SANs, and requires the peer to hold the server role: whatever
//     Bighive dials (a master, a tserver, a raft peer) is a server.
//   - The server role is a SAN URI, bighive://server (RoleURI), on the
//     certificate. A URI was chosen over an extended key usage because
//     openssl and every CA tool write one with a plain subjectAltName
//     line, and because serverAuth/clientAuth usages are needed by every
//     TLS endpoint anyway and so could not tell a server from a client.
//   - A listener asks for a client certificate and verifies it against
//     the CA when one is given (tls.VerifyClientCertIfGiven): clients need
//     none, but a certificate that does not chain to the CA fails the
//     handshake. Internal RPCs (InternalMethods) are accepted only from a
//     verified peer certificate with the server role; the interceptors
//     answer Unauthenticated without a certificate and PermissionDenied
//     with one that lacks the role, naming the method.
//   - The raft transport is mutual TLS: both ends present a certificate
//     with the server role, or the connection is closed.
//   - The files are re-read when their size or modification time changes,
//     checked at most once per ReloadInterval and only when a handshake
//     needs them; connections already open keep their session. A change
//     that does not load (a key that does not match the certificate, a
//     half-written file) is logged and the previous material stays in use
//     until the files load again.
//   - Without any of the flags there is no TLS at all (Files.Enabled is
//     false): Credentials then returns insecure credentials, the only place
//     Bighive uses them.
package tlsconf
