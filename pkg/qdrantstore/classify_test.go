package qdrantstore

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lethe-erasure/lethe/pkg/retry"
)

func TestClassify(t *testing.T) {
	for code, permanent := range map[codes.Code]bool{
		codes.InvalidArgument:    true,
		codes.PermissionDenied:   true,
		codes.Unimplemented:      true,
		codes.FailedPrecondition: false,
		codes.Unavailable:        false,
		codes.DeadlineExceeded:   false,
		codes.ResourceExhausted:  false,
		codes.Aborted:            false,
		codes.Internal:           false,
		codes.Canceled:           false,
	} {
		// The client wraps statuses in its own error type; classification must see through.
		err := classify(fmt.Errorf("Count() failed: coll: %w", status.Error(code, "x")))
		if retry.IsPermanent(err) != permanent {
			t.Errorf("%v: permanent = %v, want %v", code, retry.IsPermanent(err), permanent)
		}
		if status.Code(err) != code {
			t.Errorf("%v: classification lost the code: %v", code, status.Code(err))
		}
	}
}

func TestRedactKeepsTheChain(t *testing.T) {
	inner := retry.Permanent(status.Error(codes.InvalidArgument, "Count() failed: mem_alice: bad"))
	err := redact(inner, "mem_alice", "mem_{subject}")
	if got := err.Error(); strings.Contains(got, "alice") || !strings.Contains(got, "Count() failed: mem_{subject}: bad") {
		t.Errorf("redacted = %q", got)
	}
	if !retry.IsPermanent(err) || status.Code(err) != codes.InvalidArgument {
		t.Errorf("redaction broke the chain: %v", err)
	}
}
