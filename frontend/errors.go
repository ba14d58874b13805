package frontend

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"bighive/internal/apierr"
)

// This file is the one mapping from Bighive's errors to the codes and the
// wording Cloud Bigtable clients expect (docs/bigtable-api.md, "Errors").
// Every served data and admin method returns its error through apiErr,
// and MutateRows its per-entry statuses through apiStatus; the table of
// codes in docs/bigtable-api.md lists what comes out.

// call names the request an error is about: its method, the resource it
// names (a table's projects/{p}/instances/{i}/tables/{t}, or an instance's
// projects/{p}/instances/{i}) when that name is well formed, and its row
// and MutateRows entry when it has them. It is made only on the error
// path.
type call struct {
	method string
	kind   string // "table" or "instance"; empty: no resource named
	name   string // the resource name
	row    []byte
	hasRow bool
	entry  int // the MutateRows entry, or -1
}

// tableCall is a call on the table named name (as the request gives it).
func tableCall(method, name string) call {
	c := call{method: method, entry: -1}
	if _, err := parseTable(name); err == nil {
		c.kind, c.name = "table", name
	}
	return c
}

// rowCall is a call on one row of the table named name.
func rowCall(method, name string, row []byte) call {
	c := tableCall(method, name)
	c.row, c.hasRow = row, true
	return c
}

// instanceCall is a call on the instance named name.
func instanceCall(method, name string) call {
	c := call{method: method, entry: -1}
	if _, err := parseInstance(name); err == nil {
		c.kind, c.name = "instance", name
	}
	return c
}

// subject says what the request was, the start of every message:
// `MutateRow of row "r" in table "projects/p/instances/i/tables/t"`.
func (c call) subject() string {
	var b strings.Builder
	b.WriteString(c.method)
	if c.entry >= 0 {
		fmt.Fprintf(&b, " entry %d", c.entry)
	}
	if c.hasRow {
		fmt.Fprintf(&b, " of row %q", c.row)
	}
	if c.kind != "" {
		if c.hasRow {
			b.WriteString(" in ")
		} else {
			b.WriteString(" of ")
		}
		fmt.Fprintf(&b, "%s %q", c.kind, c.name)
	}
	return b.String()
}

// reqError is the frontend's own refusal of a request (a malformed name, a
// field out of range, something Bighive does not serve): a code and a
// reason about the request, to which the mapping adds only the subject.
type reqError struct {
	code   codes.Code
	reason string
}

func (e *reqError) Error() string { return e.reason }

// GRPCStatus lets status.Code see the code.
func (e *reqError) GRPCStatus() *status.Status { return status.New(e.code, e.reason) }

// reqErr is a reqError; the reason names no method or table (apiErr adds
// them).
func reqErr(c codes.Code, format string, args ...any) error {
	return &reqError{code: c, reason: fmt.Sprintf(format, args...)}
}

// errNoTable is an admin method's answer for a table that does not exist;
// the mapping names the table.
var errNoTable = apierr.NotFound("table not found")

// The reasons of the statuses the mapping rewords whole.
const (
	// reasonOutcomeUnknown keeps the client library's words ("Status
	// rules" in package client): Unavailable, and the write may have been
	// applied.
	reasonOutcomeUnknown = "outcome unknown, the write may or may not have been applied; read the row to learn which before you retry a write that is not idempotent"
	reasonUnavailable    = "the tablet servers holding the rows are unavailable for now; try again"
	reasonTimedOut       = "the tablet servers did not answer in time; try again"
	reasonDeadline       = "the request's deadline passed"
	reasonCanceled       = "the request was canceled"
)

// apiErr is err, the failure of c for a caller whose context is ctx, as
// the gRPC status error a Bigtable client expects (nil for nil).
func (s *Server) apiErr(ctx context.Context, c call, err error) error {
	if err == nil {
		return nil
	}
	return s.apiStatus(ctx, c, err).Err()
}

// apiStatus is the mapping, as a status. The frontend's own refusals keep
// their code and reason. Of Bighive's errors (the client library's, which
// are statuses with the codes of the client's "Status rules"):
//
//   - Canceled stays Canceled.
//   - Unavailable (or an internal DeadlineExceeded) saying that a write's
//     outcome is unknown stays Unavailable and says so.
//   - DeadlineExceeded, which Bigtable clients take for their own
//     deadline and do not retry, is kept only once the caller's deadline
//     has passed; before, it is Unavailable, which they retry.
//   - Unavailable stays Unavailable.
//   - An unknown column family is NotFound naming the family, as in Cloud
//     Bigtable ("Requested column family not found"); Bighive's client
//     and tservers answer InvalidArgument.
//   - Any other NotFound is the table's: NotFound naming its resource
//     name; AlreadyExists of CreateTable names it too.
//   - Any other code is kept, with the innermost reason of the message:
//     the client's, the tservers' and the storage layers' prefixes
//     (`client: look up row …`, `tablet t…: replica: …`) are dropped.
//
// Every message starts with the call's subject (method, row, resource
// name). Bighive's status details (TabletError, NotLeader) are not passed
// on: they mean nothing to a Bigtable client. The original error is logged
// at debug level.
func (s *Server) apiStatus(ctx context.Context, c call, err error) *status.Status {
	var re *reqError
	if errors.As(err, &re) {
		return status.New(re.code, c.subject()+": "+re.reason)
	}
	st := apierr.ToStatus(err)
	code, msg := st.Code(), st.Message()
	if s != nil {
		s.log.Debug("frontend: call failed", "method", c.method, "resource", c.name, "code", code, "err", msg)
	}
	var reason string
	switch {
	case code == codes.Canceled:
		reason = reasonCanceled
	case (code == codes.Unavailable || code == codes.DeadlineExceeded) && outcomeUnknown(msg):
		code, reason = codes.Unavailable, reasonOutcomeUnknown
	case code == codes.DeadlineExceeded && ctx.Err() != nil:
		reason = reasonDeadline
	case code == codes.DeadlineExceeded:
		// Not the caller's deadline: an internal timeout of the call,
		// which the caller may retry.
		code, reason = codes.Unavailable, reasonTimedOut
	case code == codes.Unavailable:
		reason = reasonUnavailable
	case (code == codes.InvalidArgument || code == codes.NotFound) && familyNamed(msg, "unknown column family ") != nil:
		code, reason = codes.NotFound, fmt.Sprintf("requested column family %q not found", *familyNamed(msg, "unknown column family "))
	case code == codes.NotFound && familyNamed(msg, "column family ") != nil:
		reason = fmt.Sprintf("column family %q not found", *familyNamed(msg, "column family "))
	case code == codes.NotFound && c.kind == "table":
		return status.New(codes.NotFound, fmt.Sprintf("%s: table %q not found", c.method, c.name))
	case code == codes.AlreadyExists && c.kind == "table" && c.method == "CreateTable":
		return status.New(codes.AlreadyExists, fmt.Sprintf("%s: table %q already exists", c.method, c.name))
	default:
		reason = innermost(msg)
	}
	return status.New(code, c.subject()+": "+reason)
}

// outcomeUnknown reports whether msg says that a write may have been
// applied: the client library's words, or the tserver's.
func outcomeUnknown(msg string) bool {
	return strings.Contains(msg, "outcome unknown") || strings.Contains(msg, "outcome is unknown")
}

// familyNamed is the family a message names as `<lead>"<family>"` (Go
// quoting, as every Bighive layer writes it), or nil.
func familyNamed(msg, lead string) *string {
	i := strings.Index(msg, lead+`"`)
	if i < 0 {
		return nil
	}
	q, err := strconv.QuotedPrefix(msg[i+len(lead):])
	if err != nil {
		return nil
	}
	f, err := strconv.Unquote(q)
	if err != nil {
		return nil
	}
	return &f
}

// internalSegment matches a part of a message that names Bighive's
// internals rather than the request: the prefix of a layer (client,
// tserver, tablet, replica, master, frontend), a Bighive table, or an
// operation of the client library, which the subject says better.
var internalSegment = regexp.MustCompile(`^(?:(?:client|tablet|replica|tserver|master|frontend)(?: \S+)?` +
	`|table "(?:[^"\\]|\\.)*"` +
	`|(?:open table|look up row|apply to row|apply bulk|conditional mutation of row|read-modify-write of row|read rows|sample row keys|get row|scan|` +
	`create table|delete table|drop all rows of table|drop rows with prefix|create column family|delete column family|` +
	`set the GC policy of column family|list tables|tablets of table|` +
	`create backup|get backup|list backups|update backup|delete backup|restore backup)(?: .*)?)$`)

// innermost is msg without its leading internal parts: msg is cut at
// each ": " outside quotes, and the parts from the first one that is not
// internal on are kept (the last part if all are).
func innermost(msg string) string {
	parts := splitMessage(msg)
	i := 0
	for i < len(parts)-1 && internalSegment.MatchString(parts[i]) {
		i++
	}
	return strings.Join(parts[i:], ": ")
}

// splitMessage cuts msg at each ": " outside double quotes and backquotes.
func splitMessage(msg string) []string {
	var parts []string
	start, quote := 0, byte(0)
	for i := 0; i < len(msg); i++ {
		switch b := msg[i]; {
		case quote != 0:
			if b == '\\' && quote == '"' {
				i++
			} else if b == quote {
				quote = 0
			}
		case b == '"' || b == '`':
			quote = b
		case b == ':' && i+1 < len(msg) && msg[i+1] == ' ':
			parts = append(parts, msg[start:i])
			start = i + 2
			i++
		}
	}
	return append(parts, msg[start:])
}
