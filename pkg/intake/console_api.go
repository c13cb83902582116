package intake

import (
	"net/http"
	"strconv"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/dlq"
	"github.com/lethe-erasure/lethe/pkg/event"
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
	n, err := dlq.Replay(r.Context(), s.DeadLetters.Brokers, s.DeadLetters.Registry, body.Topic, func(e dlq.Entry) bool {
		tenant := deadLetterTenant(e)
		mayAct := s.Auth == nil || (tenant == "" && p.May("*")) || (tenant != "" && p.May(tenant))
		return mayAct && e.Partition == body.Partition && e.Offset == body.Offset
	})
	if err != nil {
		s.log().Warn("dead letter not replayed", zap.String("topic", body.Topic), zap.Error(err))
		writeError(w, http.StatusServiceUnavailable, "broker unavailable")
		return
	}
	s.log().Info("dead letter replayed", zap.String("topic", body.Topic), zap.Int32("partition", body.Partition),
		zap.String("offset", strconv.FormatInt(body.Offset, 10)), zap.Int("replayed", n))
	writeJSON(w, http.StatusOK, map[string]int{"replayed": n})
}

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
