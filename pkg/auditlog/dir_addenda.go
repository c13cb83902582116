package auditlog

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lethe-erasure/lethe/pkg/retry"
)

var (
	_ Addenda   = (*DirStore)(nil)
	_ Scheduler = (*DirStore)(nil)
)

// dirTasks is DirStore's schedule: tasks by id, and their (due, id) keys in order.
type dirTasks struct {
	byID  map[string]Task
	order []taskKey
}

type taskKey struct {
	due int64 // unix nanoseconds
	id  string
}

func (k taskKey) less(o taskKey) bool { return k.due < o.due || (k.due == o.due && k.id < o.id) }

func (d *dirTasks) put(t Task) {
	d.remove(t.ID)
	k := taskKey{t.Due.UnixNano(), t.ID}
	i := sort.Search(len(d.order), func(i int) bool { return !d.order[i].less(k) })
	d.order = append(d.order, taskKey{})
	copy(d.order[i+1:], d.order[i:])
	d.order[i] = k
	d.byID[t.ID] = t
}

func (d *dirTasks) remove(id string) {
	old, ok := d.byID[id]
	if !ok {
		return
	}
	k := taskKey{old.Due.UnixNano(), id}
	i := sort.Search(len(d.order), func(i int) bool { return !d.order[i].less(k) })
	if i < len(d.order) && d.order[i] == k {
		d.order = append(d.order[:i], d.order[i+1:]...)
	}
	delete(d.byID, id)
}

// PutAddendum creates a, or fails with ErrExists. One record stores the addendum and its
// tenant index entry.
func (s *DirStore) PutAddendum(ctx context.Context, a Addendum) error {
	if a.AddendumID == "" || a.TenantID == "" || a.RequestID == "" {
		return retry.Permanent(errors.New("auditlog: addendum needs an id, a request id and a tenant id"))
	}
	err := s.write(ctx, item{op: opAddendum, a: a.AddendumID}, func() ([]byte, error) {
		if _, ok := s.addenda[a.AddendumID]; ok {
			return nil, ErrExists
		}
		return record(opAddendum, "", a)
	})
	return wrap("put addendum", err)
}

// GetAddendum returns the addendum of id or ErrNotFound.
func (s *DirStore) GetAddendum(ctx context.Context, id string) (Addendum, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.addenda[id]
	if !ok {
		return Addendum{}, fmt.Errorf("auditlog: get addendum: %w", ErrNotFound)
	}
	var a Addendum
	return a, wrap("get addendum", decode(b, &a))
}

// TenantAddenda returns the tenant's addenda ordered by Seq.
func (s *DirStore) TenantAddenda(ctx context.Context, tenant string) ([]Addendum, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.addendaLocked(func(a Addendum) bool { return a.TenantID == tenant }, s.addendumIdx[tenant])
}

// AddendaOf returns the request's addenda ordered by Seq.
func (s *DirStore) AddendaOf(ctx context.Context, requestID string) ([]Addendum, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.addendaLocked(func(a Addendum) bool { return a.RequestID == requestID }, s.addendaOfReq[requestID])
}

func (s *DirStore) addendaLocked(keep func(Addendum) bool, ids map[string]bool) ([]Addendum, error) {
	var as []Addendum
	for id := range ids {
		var a Addendum
		if err := decode(s.addenda[id], &a); err != nil {
			return nil, wrap("addenda", err)
		}
		if keep(a) {
			as = append(as, a)
		}
	}
	SortAddenda(as)
	return as, nil
}

func (s *DirStore) indexAddendum(a Addendum, js []byte) {
	s.addenda[a.AddendumID] = js
	if s.addendumIdx[a.TenantID] == nil {
		s.addendumIdx[a.TenantID] = map[string]bool{}
	}
	s.addendumIdx[a.TenantID][a.AddendumID] = true
	if s.addendaOfReq[a.RequestID] == nil {
		s.addendaOfReq[a.RequestID] = map[string]bool{}
	}
	s.addendaOfReq[a.RequestID][a.AddendumID] = true
}

// Schedule stores the tasks, each replacing the task of its id; written at once, they
// share the log's fsyncs.
func (s *DirStore) Schedule(ctx context.Context, tasks ...Task) error {
	for _, t := range tasks {
		if t.ID == "" || t.RequestID == "" || t.Due.IsZero() {
			return retry.Permanent(errors.New("auditlog: task needs an id, a request id and a due time"))
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, t := range tasks {
		t.Due = t.Due.UTC()
		g.Go(func() error {
			return s.write(gctx, item{op: opTask, a: t.ID}, func() ([]byte, error) {
				return record(opTask, "", t)
			})
		})
	}
	return wrap("schedule", g.Wait())
}

// Due returns up to limit tasks due at or before now, earliest first. It reads only those
// tasks: the schedule is kept ordered by due time.
func (s *DirStore) Due(ctx context.Context, now time.Time, limit int) ([]Task, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Task
	cut := now.UnixNano()
	for _, k := range s.tasks.order {
		if k.due > cut || (limit > 0 && len(out) == limit) {
			break
		}
		out = append(out, s.tasks.byID[k.id])
	}
	return out, ctx.Err()
}

// Unschedule removes the task of t.ID unless it is gone.
func (s *DirStore) Unschedule(ctx context.Context, t Task) error {
	err := s.write(ctx, item{op: opTask, a: t.ID}, func() ([]byte, error) {
		if _, ok := s.tasks.byID[t.ID]; !ok {
			return nil, nil
		}
		return record(opUntask, "", Task{ID: t.ID})
	})
	return wrap("unschedule", err)
}
