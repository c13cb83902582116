package auditlog

import (
	"context"
	"time"
)

// Task kinds of the aggregator's schedule.
const (
	TaskSweep    = "SWEEP"    // re-verify every store of the request
	TaskShred    = "SHRED"    // destroy the request's data key, append SHREDDED
	TaskPhysical = "PHYSICAL" // a store's physical-erasure date: append PHYSICAL unless it reappeared or was re-applied
)

// Task is one durable, timed piece of work of the aggregator about a completed request.
// It holds no identifier.
type Task struct {
	ID        string    `json:"id"` // unique; scheduling an id again replaces its task
	Kind      string    `json:"kind"`
	Due       time.Time `json:"due"`
	RequestID string    `json:"request_id"`
	TenantID  string    `json:"tenant_id"`
	ReceiptID string    `json:"receipt_id,omitempty"`
	N         int       `json:"n,omitempty"`     // a sweep's ordinal, from 1
	Last      bool      `json:"last,omitempty"`  // the request's last sweep
	Store     string    `json:"store,omitempty"` // a PHYSICAL task's store
	// Within is a PHYSICAL task's physical_within: how far a reappearance or re-apply
	// moves its date.
	Within time.Duration `json:"within,omitempty"`
}

// Scheduler is the durable schedule of tasks (part of Table), indexed by due time, so that
// a tick costs in proportion to the tasks due, not to every request ever made.
type Scheduler interface {
	// Schedule stores the tasks, each replacing a task with its id (an id given twice in
	// one call keeps one of its tasks). The tasks of one call (a receipt's) are written
	// together, in fewer calls than one by one where the backend allows; a failed call
	// may have stored some of them, and repeating it is harmless.
	Schedule(ctx context.Context, tasks ...Task) error
	// Due returns up to limit tasks due at or before now, earliest first. Tasks due
	// earlier that were never removed (a missed tick, a crash) are returned too.
	Due(ctx context.Context, now time.Time, limit int) ([]Task, error)
	// Unschedule removes the task t (by id and due time); removing a task that is gone is
	// a no-op.
	Unschedule(ctx context.Context, t Task) error
}
