package frontend

import (
	"context"
	"fmt"
	"sync"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Long-running operations (google.longrunning.Operations): CreateBackup,
// RestoreTable and CopyBackup answer an Operation, which the caller polls with
// GetOperation until it is done. The work runs in the frontend that took
// the request, in a goroutine of its own under the caller's credentials
// (the request's context without its cancellation, bounded by opTimeout);
// the request waits up to Server.opWait (defaultOpWait) for it, so a short operation is answered
// done at once and its caller never polls. The frontend keeps its
// operations in memory for opKeep after they end: another frontend, or
// this one restarted, answers NotFound for them, and the backup or the
// table they made is then seen with GetBackup or GetTable.

const (
	opTimeout = 10 * time.Minute
	opKeep    = time.Hour
)

// defaultOpWait is how long a request waits for its operation to end
// (Server.opWait; the tests set 0 to make the client poll).
const defaultOpWait = 5 * time.Second

// operationsServer is google.longrunning.Operations over Server.ops.
type operationsServer struct {
	longrunningpb.UnimplementedOperationsServer
	s *Server
}

// operations holds this frontend's operations by name.
type operations struct {
	mu   sync.Mutex
	seq  uint64
	byID map[string]*operation
}

type operation struct {
	op    *longrunningpb.Operation // guarded by operations.mu
	ended time.Time
	done  chan struct{}
}

// start runs fn as the operation on resource (its metadata meta) and
// returns the operation as it stands after at most wait.
func (o *operations) start(ctx context.Context, wait time.Duration, resource string, meta proto.Message, fn func(ctx context.Context) (proto.Message, error), s *Server, c call) (*longrunningpb.Operation, error) {
	md, err := anypb.New(meta)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	if o.byID == nil {
		o.byID = map[string]*operation{}
	}
	now := time.Now()
	for id, op := range o.byID {
		if !op.ended.IsZero() && now.Sub(op.ended) > opKeep {
			delete(o.byID, id)
		}
	}
	o.seq++
	name := fmt.Sprintf("%s/operations/%d-%d", resource, now.UnixNano(), o.seq)
	op := &operation{op: &longrunningpb.Operation{Name: name, Metadata: md}, done: make(chan struct{})}
	o.byID[name] = op
	o.mu.Unlock()

	go func() {
		defer close(op.done)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
		defer cancel()
		resp, err := fn(rctx)
		next := &longrunningpb.Operation{Name: name, Metadata: md, Done: true}
		if err != nil {
			next.Result = &longrunningpb.Operation_Error{Error: s.apiStatus(rctx, c, err).Proto()}
		} else if a, aerr := anypb.New(resp); aerr != nil {
			next.Result = &longrunningpb.Operation_Error{Error: s.apiStatus(rctx, c, aerr).Proto()}
		} else {
			next.Result = &longrunningpb.Operation_Response{Response: a}
		}
		o.mu.Lock()
		op.op, op.ended = next, time.Now()
		o.mu.Unlock()
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-op.done:
	case <-t.C:
	case <-ctx.Done():
	}
	return o.get(name)
}

func (o *operations) get(name string) (*longrunningpb.Operation, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	op, ok := o.byID[name]
	if !ok {
		return nil, reqErr(codes.NotFound, "operation %q not found: this frontend did not start it or ended it over %s ago", name, opKeep)
	}
	return proto.Clone(op.op).(*longrunningpb.Operation), nil
}

// GetOperation answers an operation's state.
func (s *operationsServer) GetOperation(ctx context.Context, req *longrunningpb.GetOperationRequest) (*longrunningpb.Operation, error) {
	op, err := s.s.ops.get(req.GetName())
	if err != nil {
		return nil, s.s.apiErr(ctx, call{method: "GetOperation", entry: -1}, err)
	}
	return op, nil
}
