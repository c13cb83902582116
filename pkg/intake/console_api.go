package intake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/discovery"
	"github.com/lethe-erasure/lethe/pkg/dlq"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
)

// DeadLetters configures the dead-letter endpoints (GET /v1/dead-letters, POST
// /v1/dead-letters/replay) the console uses: the brokers and the dead-letter topics.
type DeadLetters struct {
	Brokers broker.Config
	// Registry decodes registry-framed dead letters for their summaries; nil:
	// single-object ones only.
	Registry *schemareg.Codec
	Topics   []string // default: the .dlq topics of erasure.intake, erasure.requested, erasure.store.done
}

func (d *DeadLetters) topics() []string {
	if len(d.Topics) > 0 {
		return d.Topics
	}
	return []string{event.TopicIntake + ".dlq", event.TopicRequested + ".dlq", event.TopicStoreDone + ".dlq"}
}

// InventoryView is the answer of GET /v1/inventory: the inventory's stores and kinds,
// without their locators (which name buckets, hosts and collections).
type InventoryView struct {
	Version string      `json:"version"`
	Stores  []StoreView `json:"stores"`
	Kinds   []string    `json:"kinds"`
}

// StoreView is one inventory store in InventoryView.
type StoreView struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Physical string `json:"physical,omitempty"`
}

func (s *Service) handleInventory(w http.ResponseWriter, _ *http.Request) {
	v := InventoryView{Version: s.Inventory.Version, Stores: []StoreView{}, Kinds: []string{}}
	seen := map[string]bool{}
	for _, st := range s.Inventory.Stores {
		v.Stores = append(v.Stores, StoreView{Name: st.Name, Kind: st.Kind, Physical: st.Physical})
		if !seen[st.Kind] {
			seen[st.Kind] = true
			v.Kinds = append(v.Kinds, st.Kind)
		}
	}
	writeJSON(w, http.StatusOK, v)
}

// UncoveredView is the body of GET /v1/discovery/uncovered: the last discovery report of
// each kind and, flattened, every location they found outside the inventory.
type UncoveredView struct {
	Reports   []discovery.Report   `json:"reports"`
	Uncovered []discovery.Location `json:"uncovered"`
}

// handleUncovered answers GET /v1/discovery/uncovered (operators only) from Discovery. A
// deployment whose deleters run apart answers 404 naming where their reports are.
func (s *Service) handleUncovered(w http.ResponseWriter, _ *http.Request) {
	if s.Discovery == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "discovery runs in each deleter: read GET /discovery on its metrics address, or lethectl inventory discover --deleter URL"})
		return
	}
	v := UncoveredView{Reports: s.Discovery(), Uncovered: []discovery.Location{}}
	for _, r := range v.Reports {
		v.Uncovered = append(v.Uncovered, r.Uncovered...)
	}
	writeJSON(w, http.StatusOK, v)
}

// deadLetterTenant is the tenant an entry belongs to: its event's, or the key of an
// erasure.intake record (keyed by tenant); "" when unknown (only operators of every
// tenant see it).
func deadLetterTenant(e dlq.Entry) string {
	if e.Event != nil {
		return e.Event.TenantID
	}
	if e.SourceTopic == event.TopicIntake {
		return e.Key
	}
	return ""
}

func (s *Service) handleDeadLetters(w http.ResponseWriter, r *http.Request) {
	out := []map[string]any{}
	if s.DeadLetters == nil {
		writeJSON(w, http.StatusOK, map[string]any{"dead_letters": out})
		return
	}
	p := principal(r)
	for _, t := range s.DeadLetters.topics() {
		entries, err := dlq.List(r.Context(), s.DeadLetters.Brokers, s.DeadLetters.Registry, t, 500)
		if err != nil {
			s.log().Warn("dead letters not listed", zap.String("topic", t), zap.Error(err))
			continue
		}
		for _, e := range entries {
			if tenant := deadLetterTenant(e); (tenant == "" && s.Auth != nil && !p.May("*")) || (tenant != "" && !s.visible(p, tenant)) {
				continue
			}
			out = append(out, map[string]any{"topic": t, "entry": e})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"dead_letters": out})
}

// ReplayRequest is the body of POST /v1/dead-letters/replay: one dead letter.
type ReplayRequest struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// handleReplay replays one dead letter for the caller (dlq.Replay, marked with the
// caller's name). A record of erasure.intake is submitted as the caller's request
// (replayIntake). The answer is {"replayed": n} (0 when the record does not exist, was
// replayed already or is of a tenant the caller may not act for), or, for a record that
// cannot be replayed, 422 (redacted, invalid), 409 (its idempotency key names another
// request) or 403 (the caller may not act for the tenant the record names) with the
// reason.
func (s *Service) handleReplay(w http.ResponseWriter, r *http.Request) {
	var body ReplayRequest
	if !s.decodeBody(w, r, &body) {
		return
	}
	if s.DeadLetters == nil {
		writeError(w, http.StatusBadRequest, "dead letters are not configured")
		return
	}
	known := false
	for _, t := range s.DeadLetters.topics() {
		known = known || t == body.Topic
	}
	if !known {
		writeError(w, http.StatusBadRequest, "topic is not a dead-letter topic")
		return
	}
	p := principal(r)
	log := s.log().With(zap.String("topic", body.Topic), zap.Int32("partition", body.Partition),
		zap.String("offset", strconv.FormatInt(body.Offset, 10)), zap.String("replayed_by", p.Name))
	res, err := dlq.Replay(r.Context(), s.DeadLetters.Brokers, s.DeadLetters.Registry, body.Topic, dlq.Options{
		Filter: func(e dlq.Entry) bool {
			tenant := deadLetterTenant(e)
			mayAct := s.Auth == nil || (tenant == "" && p.May("*")) || (tenant != "" && p.May(tenant))
			return mayAct && e.Partition == body.Partition && e.Offset == body.Offset
		},
		By:        p.Name,
		Intake:    s.replayIntake(p),
		Requested: s.replayRequested(p),
	})
	var limited rateLimited
	switch {
	case errors.As(err, &limited):
		auth.WriteTooManyRequests(w, time.Duration(limited))
		return
	case errors.Is(err, ErrUnavailable):
		log.Warn("dead letter not replayed", zap.Error(err))
		writeError(w, http.StatusServiceUnavailable, UnavailableReason(err))
		return
	case err != nil:
		log.Warn("dead letter not replayed", zap.Error(err))
		writeError(w, http.StatusServiceUnavailable, "broker unavailable")
		return
	}
	if len(res.Refused) > 0 {
		ref := res.Refused[0]
		log.Info("dead letter refused for replay", zap.String("reason", ref.Reason))
		writeError(w, refusalStatus(ref.Err), ref.Reason)
		return
	}
	log.Info("dead letter replayed", zap.Int("replayed", res.Replayed))
	writeJSON(w, http.StatusOK, map[string]int{"replayed": res.Replayed})
}

// refusalStatus is the answer to a replay refused with err.
func refusalStatus(err error) int {
	switch {
	case errors.Is(err, auth.ErrForbidden), errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, ErrConflict), errors.Is(err, ErrState):
		return http.StatusConflict
	}
	return http.StatusUnprocessableEntity
}

// rateLimited ends a replay whose tenant used up its submission rate; it is the wait.
type rateLimited time.Duration

func (rateLimited) Error() string { return "rate limit exceeded" }

// replayIntake is the dlq.Options.Intake of a replay by p. A replayed erasure.intake
// record carries no credential: it is submitted as p's request, with the checks of an
// HTTP submission by p: decoded, validated, refused when it names a placeholder of a
// redacted dead letter, authorised for p, rate-limited by tenant, then through the gates
// (dry runs, windows, approvals) and the idempotency key of Submit. It is never published
// straight to erasure.requested. A record that cannot be accepted is refused
// (dlq.ErrRefused) with the reason; an unavailable component or the rate limit ends the
// replay.
func (s *Service) replayIntake(p auth.Principal) func(context.Context, *kgo.Record) error {
	return func(ctx context.Context, rec *kgo.Record) error {
		in, err := s.decodeRecord(ctx, rec)
		if retry.IsPermanent(err) {
			return refused(err)
		}
		if err != nil {
			return err
		}
		if err := s.Validate(&in); err != nil {
			return refused(err)
		}
		if err := refusePlaceholders(rec, in); err != nil {
			return refused(err)
		}
		if s.Auth != nil {
			if err := p.Authorize(in.TenantID); err != nil {
				return refused(err)
			}
		}
		if ok, wait := s.Limiter.Allow(in.TenantID); !ok {
			metrics.Or(s.Metrics).Rejected.WithLabelValues(metrics.ReasonRateLimited).Inc()
			return rateLimited(wait)
		}
		in.Source = p.Name // the principal who replayed it, not what the record claims
		_, err = s.SubmitWith(ctx, in, SubmitOptions{Channel: "replay"})
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrConflict) {
			return refused(err)
		}
		return err
	}
}

// replayRequested returns the replay of p's dead letters of erasure.requested: each
// passes the gate (admit) with the holds in force now before it is published again.
func (s *Service) replayRequested(p auth.Principal) func(context.Context, *kgo.Record) error {
	return func(ctx context.Context, rec *kgo.Record) error {
		var req event.Requested
		if err := s.Registry.Decode(ctx, event.Request, rec.Value, &req); err != nil {
			return refused(err)
		}
		if s.Auth != nil {
			if err := p.Authorize(req.TenantID); err != nil {
				return refused(err)
			}
		}
		switch _, err := s.Store.GetReceipt(ctx, req.RequestID); {
		case err == nil:
			return refused(fmt.Errorf("%w: the request is complete", ErrState))
		case !errors.Is(err, auditlog.ErrNotFound):
			return s.unavailable(ErrStateStoreUnavailable, req.TenantID, err)
		}
		if err := s.admit(ctx, &req, nil); err != nil {
			if errors.Is(err, ErrUnavailable) {
				return err
			}
			return refused(err)
		}
		return s.publish(ctx, &req)
	}
}

// refused marks err as the reason a record is not replayed.
func refused(err error) error { return fmt.Errorf("%w: %w", dlq.ErrRefused, err) }

// Whoami is the answer of GET /v1/whoami: the caller's name, tenants and roles.
type Whoami struct {
	Name    string   `json:"name"`
	Tenants []string `json:"tenants"`
	Roles   []string `json:"roles"`
}

func (s *Service) handleWhoami(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	out := Whoami{Name: p.Name, Tenants: p.Tenants, Roles: p.Roles}
	if out.Roles == nil {
		out.Roles = []string{}
	}
	writeJSON(w, http.StatusOK, out)
}

// ChainState is the answer of GET /v1/tenants/{tenant}/chain: whether the tenant's
// receipt chain verifies (every receipt's hash recomputed and linked to its predecessor).
type ChainState struct {
	TenantID string `json:"tenant_id"`
	Receipts int    `json:"receipts"`
	Verified bool   `json:"verified"`
	Error    string `json:"error,omitempty"`
}

func (s *Service) handleChain(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	if !s.authorize(w, r, tenant) {
		return
	}
	rcs, err := s.Store.Receipts(r.Context(), tenant)
	if err != nil {
		s.log().Warn("receipts not read", zap.Error(err))
		writeError(w, http.StatusServiceUnavailable, "state store unavailable")
		return
	}
	out := ChainState{TenantID: tenant, Receipts: len(rcs), Verified: true}
	if err := auditlog.VerifyChain(r.Context(), s.Store, tenant); err != nil {
		out.Verified, out.Error = false, err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}
