// Package workflow holds the privacy team's gates in front of an erasure: dry runs,
// cancellation windows and second-person approval, and the legal holds that exempt stores.
//
// A gated request is a Record in a Store. Its State moves only along the transitions Next
// allows (the state machine below); every move is appended to the record's History with
// the principal that caused it, so the audit trail says who previewed, confirmed,
// cancelled, approved or rejected what, and when. A record holds no raw identifier: the
// event to publish when the gate opens is kept with its identifiers sealed (or, for a
// TENANT request, without any).
//
//	          dry run                 confirm
//	submit ──────────▶ PREVIEWED ─────────────┐
//	  │                                        ▼
//	  ├─ TENANT scope ───▶ AWAITING_APPROVAL ──approve──▶ (window?) ─┐
//	  │                      │ reject ▶ REJECTED                     │
//	  │                      └ cancel ▶ CANCELLED                    │
//	  ├─ window > 0 ─────▶ SCHEDULED ──due──▶ RELEASED ◀─────────────┘
//	  │                      └ cancel (before due) ▶ CANCELLED
//	  └──────────────────────────────────────▶ RELEASED (published on erasure.requested)
//
// After RELEASED the request runs as every request does; a store under a legal hold ends
// EXEMPT and the request PARTIAL, which the intake derives from the reports.
package workflow

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/pkg/event"
)

// State is where a gated request stands.
type State string

// States of a gated request.
const (
	Previewed        State = "PREVIEWED"         // a dry run: counted per store, nothing deleted
	Scheduled        State = "SCHEDULED"         // waits out its cancellation window
	Cancelled        State = "CANCELLED"         // cancelled within its window (final)
	AwaitingApproval State = "AWAITING_APPROVAL" // a TENANT request waits for a second person
	Rejected         State = "REJECTED"          // the approver refused it (final)
	Released         State = "RELEASED"          // published on erasure.requested
)

// Action moves a record from one state to another.
type Action string

// Actions.
const (
	Confirm Action = "confirm" // PREVIEWED → the next gate, or RELEASED
	Cancel  Action = "cancel"  // SCHEDULED (before due), AWAITING_APPROVAL → CANCELLED
	Approve Action = "approve" // AWAITING_APPROVAL → the next gate, or RELEASED
	Reject  Action = "reject"  // AWAITING_APPROVAL → REJECTED
	Due     Action = "due"     // SCHEDULED → RELEASED when the window has ended
)

// Errors.
var (
	ErrNotFound = errors.New("workflow: not found")
	ErrExists   = errors.New("workflow: already exists")
	ErrConflict = errors.New("workflow: changed concurrently")
	// ErrTransition: the action is not allowed in the record's state (409).
	ErrTransition = errors.New("workflow: not allowed in this state")
)

// transitions is the state machine: for each state and action, the states it may lead to.
// Confirm and Approve lead to whichever gate comes next (see Gates).
var transitions = map[State]map[Action][]State{
	Previewed:        {Confirm: {AwaitingApproval, Scheduled, Released}},
	AwaitingApproval: {Approve: {Scheduled, Released}, Reject: {Rejected}, Cancel: {Cancelled}},
	Scheduled:        {Cancel: {Cancelled}, Due: {Released}},
}

// Allowed reports whether action may move a record from from to to.
func Allowed(from State, action Action, to State) bool {
	for _, s := range transitions[from][action] {
		if s == to {
			return true
		}
	}
	return false
}

// Final reports whether no action leaves s.
func Final(s State) bool { return len(transitions[s]) == 0 }

// Transition is one move in a record's history.
type Transition struct {
	From   State     `json:"from,omitempty"` // empty for the first
	To     State     `json:"to"`
	Action Action    `json:"action,omitempty"`
	Actor  string    `json:"actor"` // the authenticated principal
	At     time.Time `json:"at"`
}

// Record is one gated request. It holds no raw identifier.
type Record struct {
	RequestID   string      `json:"request_id"`
	TenantID    string      `json:"tenant_id"`
	SubjectHash string      `json:"subject_hash"`
	Scope       event.Scope `json:"scope"`
	Regulation  string      `json:"regulation"`
	State       State       `json:"state"`
	SubmittedBy string      `json:"submitted_by"`
	SubmittedAt time.Time   `json:"submitted_at"`
	DueAt       time.Time   `json:"due_at"`
	// ExecuteAt is when a SCHEDULED request's window ends.
	ExecuteAt time.Time `json:"execute_at,omitzero"`
	// Window is the cancellation window that applies once the request passes its gates.
	Window time.Duration `json:"window,omitempty"`
	// NeedsApproval is set for requests that need a second person before they run.
	NeedsApproval bool         `json:"needs_approval,omitempty"`
	ApprovedBy    string       `json:"approved_by,omitempty"`
	History       []Transition `json:"history"`
	// Event is the Avro-encoded erasure.requested to publish when the gate opens, its
	// identifiers sealed; nil when the identifiers could not be kept (no sealer) and must
	// be supplied again.
	Event []byte `json:"event,omitempty"`
	// Unpublished marks a RELEASED record whose event the broker has not acknowledged yet:
	// a release claims the record first, then publishes, so replicas never both publish.
	Unpublished bool `json:"unpublished,omitempty"`
	// Version counts the record's writes; Swap compares it.
	Version int64 `json:"version"`
}

// Move returns r moved by action to to, by actor at at, or ErrTransition.
func (r Record) Move(action Action, to State, actor string, at time.Time) (Record, error) {
	if !Allowed(r.State, action, to) {
		return r, fmt.Errorf("%w: %s a %s request", ErrTransition, action, r.State)
	}
	r.History = append(append([]Transition{}, r.History...), Transition{From: r.State, To: to, Action: action, Actor: actor, At: at})
	r.State = to
	return r, nil
}

// Next is the state a request enters when it passes a gate at now: AWAITING_APPROVAL
// while it needs an approval it lacks, SCHEDULED while a window applies, else RELEASED.
func (r Record) Next() State {
	switch {
	case r.NeedsApproval && r.ApprovedBy == "":
		return AwaitingApproval
	case r.Window > 0:
		return Scheduled
	}
	return Released
}

// Store keeps records and holds durably. Implementations are safe for concurrent use.
type Store interface {
	// Create stores r (Version 1); ErrExists when its request id is stored.
	Create(ctx context.Context, r Record) error
	// Get returns the record of requestID or ErrNotFound.
	Get(ctx context.Context, requestID string) (Record, error)
	// Swap replaces the stored record with r if the stored Version is r.Version, and
	// stores r with Version+1; ErrConflict otherwise.
	Swap(ctx context.Context, r Record) (Record, error)
	// List returns every record, ordered by SubmittedAt then RequestID.
	List(ctx context.Context) ([]Record, error)
	// PutHold creates or replaces the hold h.ID.
	PutHold(ctx context.Context, h Hold) error
	// Holds returns every hold, released ones included, ordered by CreatedAt then ID.
	// Every PutHold that returned before the call, in any process, is in its answer:
	// holds are read anew for each call, never kept from an earlier one.
	Holds(ctx context.Context) ([]Hold, error)
}

// SortRecords orders rs as Store.List returns them: by SubmittedAt, then RequestID.
func SortRecords(rs []Record) {
	slices.SortFunc(rs, func(a, b Record) int {
		if c := a.SubmittedAt.Compare(b.SubmittedAt); c != 0 {
			return c
		}
		return strings.Compare(a.RequestID, b.RequestID)
	})
}

// SortHolds orders hs as Store.Holds returns them: by CreatedAt, then ID.
func SortHolds(hs []Hold) {
	slices.SortFunc(hs, func(a, b Hold) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}
