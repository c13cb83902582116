package qdrantfake

import (
	"context"
	"path"
	"strings"
	"sync"

	"github.com/qdrant/go-client/qdrant"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Fault makes calls of one gRPC method misbehave as real Qdrant can.
type Fault struct {
	// Method is the gRPC method: a name such as "Count" or "Upsert" hits it in any
	// service ("Delete" both points and collections), "Points/Delete" only the one.
	Method string
	// Code, when not codes.OK, fails the call with this status before it does anything,
	// e.g. codes.FailedPrecondition as Qdrant answers during a shard transfer ("No target
	// shard found for update", lib/collection/src/collection/point_ops.rs).
	Code codes.Code
	// Message is the status message for Code; a default one when empty.
	Message string
	// Status, for a points write, replaces the status of its answer: UpdateStatus_WaitTimeout
	// is what Qdrant answers, without an error, when the write did not finish within the
	// request's timeout. The write itself is applied, as Qdrant applies it later.
	Status qdrant.UpdateStatus
	// Times is how many calls the fault hits; 0 means every call until ClearFaults.
	Times int
}

type faults struct {
	mu    sync.Mutex
	list  []*Fault
	calls map[string]int
}

// InjectFault adds f; faults are matched in the order added.
func (s *Server) InjectFault(f Fault) {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.list = append(s.faults.list, &f)
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.list = nil
}

// Calls is how many calls of the gRPC method name (of any service) the server received.
func (s *Server) Calls(method string) int {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	return s.faults.calls[method]
}

// take counts a call of the gRPC method full ("/qdrant.Points/Delete") and returns the
// fault that hits it, if any.
func (fs *faults) take(full string) *Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.calls == nil {
		fs.calls = map[string]int{}
	}
	fs.calls[path.Base(full)]++
	for i, f := range fs.list {
		if f.Method != path.Base(full) && !strings.HasSuffix(full, "."+f.Method) {
			continue
		}
		if f.Times > 0 {
			if f.Times--; f.Times == 0 {
				fs.list = append(fs.list[:i:i], fs.list[i+1:]...)
			}
		}
		hit := *f
		return &hit
	}
	return nil
}

func (fs *faults) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	f := fs.take(info.FullMethod)
	if f == nil {
		return handler(ctx, req)
	}
	if f.Code != codes.OK {
		msg := f.Message
		if msg == "" {
			msg = "qdrantfake: injected fault"
		}
		return nil, status.Error(f.Code, msg)
	}
	resp, err := handler(ctx, req)
	if r, ok := resp.(*qdrant.PointsOperationResponse); ok && err == nil && f.Status != qdrant.UpdateStatus_UnknownUpdateStatus {
		r.GetResult().Status = f.Status
	}
	return resp, err
}
