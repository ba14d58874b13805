// Package apierr is the one place where Bighive's errors become gRPC
// statuses (invariant 8 in docs/design.md, 'bad input gets a clear status').
//
// Code anywhere below the gRPC layer returns an *Error made by one of the
// constructors (InvalidArgument, NotFound, …) or wraps one with %w; the
// server interceptors turn whatever a handler returns into a status with
// the error's code and message. Errors that carry no code become Internal,
// and are logged, since they mean a bug or a failed disk rather than bad
// input. Clients check codes with status.Code or apierr.CodeOf, and the
// tablet-routing reason with TabletReason — never by matching strings.
package apierr
