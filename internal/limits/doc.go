// Package limits names Bighive's input limits and validates requests
// against them. Every check returns an apierr InvalidArgument error whose
// message names the field, the size and the limit, so a person can act on
// it. The tserver, the master and the client library all call these, so
// the limits hold in one place.
package limits
