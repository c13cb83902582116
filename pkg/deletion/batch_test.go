package deletion_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// meetingStore's Verify waits until want calls are inside it together (or a timeout
// passes) and records whether they met; it reports the subject's id as its remaining count
// and fails the subject "bad".
type meetingStore struct {
	want   int
	mu     sync.Mutex
	inside int
	met    chan struct{}
}

func (m *meetingStore) Erase(context.Context, inventory.Entry, deletion.Subject) (deletion.Result, error) {
	return deletion.Result{}, nil
}

func (m *meetingStore) Verify(_ context.Context, _ inventory.Entry, s deletion.Subject) (event.Verification, error) {
	m.mu.Lock()
	m.inside++
	if m.inside == m.want {
		close(m.met)
	}
	m.mu.Unlock()
	select {
	case <-m.met:
	case <-time.After(5 * time.Second):
	}
	if s.ID == "bad" {
		return event.Verification{}, errors.New("unreadable")
	}
	n, _ := strconv.Atoi(s.ID)
	return event.Verification{Method: "count", Remaining: int64(n)}, nil
}

// VerifyEach runs a batch's verifications side by side and returns each subject's own
// outcome in the subjects' order.
func TestVerifyEachConcurrentInOrder(t *testing.T) {
	subjects := []deletion.Subject{{ID: "1"}, {ID: "2"}, {ID: "bad"}, {ID: "4"}}
	st := &meetingStore{want: len(subjects), met: make(chan struct{})}
	vs, errs := deletion.VerifyEach(context.Background(), st, inventory.Entry{Name: "s"}, subjects)
	select {
	case <-st.met:
	default:
		t.Error("the verifications of the batch ran one after the other")
	}
	for i, s := range subjects {
		if s.ID == "bad" {
			if errs[i] == nil {
				t.Errorf("subject %d: no error", i)
			}
			continue
		}
		if errs[i] != nil || strconv.FormatInt(vs[i].Remaining, 10) != s.ID {
			t.Errorf("subject %d: %+v, %v; want remaining %s", i, vs[i], errs[i], s.ID)
		}
	}
}
