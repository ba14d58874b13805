// Package auth authenticates callers and authorizes their gRPC calls: who
// is calling (a bearer token from a tokens file, or a client certificate)
// and whether a grant lets them make this call on this table.
//
// # Model
//
// A principal is a name. It comes from, in this order:
//
//  1. the "authorization: Bearer TOKEN" metadata, looked up in the tokens
//     file (--auth-tokens FILE);
//  2. a verified peer certificate with the SAN URI bighive://server: the
//     principal in its ForwardedPrincipalKey metadata if it sets one (a
//     follower master forwarding a certificate holder's call), else the
//     server principal, which may call everything (a master or tserver
//     calling another);
//  3. the subject CN of a verified client certificate.
//
// A grant is (principal, role, table), table "" meaning every table. The
// roles are ordered: admin implies write, write implies read. A call needs
// one role on one table, or on every table; the table comes from the
// request (a table name, or the table of the tablet a tserver call names).
// Methods, what they need and where their table comes from are listed once,
// in Methods (methods.go).
//
// # Invariants
//
//   - Only the SHA-256 of a token is held in memory; a presented token is
//     hashed and compared against every stored hash with
//     crypto/subtle.ConstantTimeCompare, without an early exit, so the time
//     a lookup takes does not depend on which token matched or how much of
//     it did.
//   - A missing or unknown credential is Unauthenticated; a known principal
//     without the role is PermissionDenied naming the principal, the table
//     and the missing role. Both are decided before the handler runs, so a
//     denied call writes nothing.
//   - A method not listed in Methods needs admin on every table: a method
//     added to a service without a line in the table is closed, not open.
//   - Internal server-to-server methods (heartbeats, registration, reports,
//     log-split tasks, assignments, schema pushes) are not checked against
//     tokens or grants: the transport guards them (server-role mutual TLS).
//   - Every denied call and every call needing admin is logged as one
//     structured line with principal, method, table and outcome.
//   - Grants are replaced whole (SetGrants) by an immutable set; a check
//     reads one consistent set.
package auth
