// Package intake accepts erasure requests, over HTTP and from erasure.intake, and serves
// their status and receipts.
//
// A request is validated at the edge (tenant ids are strict, subject and session ids are
// any valid UTF-8 without control characters that is not blank, never trimmed; see
// subject.ValidateID), before its tenant is authorised, and pseudonymised with the keyed
// pseudonym, stamped with the inventory version, the stores that must report and the due
// date of its regulation, and published on erasure.requested. Submit returns only after the
// broker acknowledged the event. With an idempotency key, the request id is derived from
// (tenant, key): submitting again returns the same request without publishing it twice,
// and reusing a key for another subject is a conflict. Without one, every submission is a
// new request with a new random id, published and erased on its own, even when its body
// is the same as an earlier one's.
//
// A request the intake cannot accept because a component it needs is down is refused with
// an error wrapping ErrUnavailable that names the component (the broker, the state store
// or the key store), and the refusal is logged with the component and the tenant, never
// an identifier.
package intake

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/consumer"
	"github.com/lethe-erasure/lethe/pkg/discovery"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/schemareg"
	"github.com/lethe-erasure/lethe/pkg/subject"
	"github.com/lethe-erasure/lethe/pkg/worker"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// Errors of Submit.
var (
	ErrInvalid  = subject.ErrInvalid                                     // the request is malformed (400)
	ErrConflict = errors.New("idempotency key used for another request") // (409)
	// ErrUnavailable means a component the intake needs is down and the request was not
	// accepted (503); every such error wraps one of the three below, which names it.
	ErrUnavailable = errors.New("request not accepted")
	// ErrBrokerUnavailable: the broker did not acknowledge erasure.requested.
	ErrBrokerUnavailable = fmt.Errorf("%w: broker unavailable", ErrUnavailable)
	// ErrStateStoreUnavailable: the state store (the audit table of requests and receipts,
	// DynamoDB or the directory store) could not be read.
	ErrStateStoreUnavailable = fmt.Errorf("%w: state store unavailable", ErrUnavailable)
	// ErrKeyStoreUnavailable: the key store (per-request data keys that seal identifiers,
	// DynamoDB or the directory store) could not store the request's key.
	ErrKeyStoreUnavailable = fmt.Errorf("%w: key store unavailable", ErrUnavailable)
)

// Components named by the Unavailable errors, as logged in the field "component".
var unavailableComponents = []struct {
	err  error
	name string
}{
	{ErrBrokerUnavailable, "broker"},
	{ErrStateStoreUnavailable, "state_store"},
	{ErrKeyStoreUnavailable, "key_store"},
}

// unavailable returns the refusal of a request for tenant because of cause, one of the
// Unavailable errors wrapping the component's error, and logs it without identifiers.
func (s *Service) unavailable(component error, tenant string, cause error) error {
	name := "unknown"
	for _, c := range unavailableComponents {
		if c.err == component {
			name = c.name
		}
	}
	s.log().Warn("request not accepted: component unavailable", zap.String("component", name),
		zap.String("tenant", tenant), zap.Error(cause))
	return fmt.Errorf("%w: %v", component, cause)
}

// UnavailableReason is the answer to a caller refused with err: the message of the
// Unavailable error err wraps, which names the component ("request not accepted: state
// store unavailable"), and never the cause, which may describe the infrastructure.
func UnavailableReason(err error) string {
	for _, c := range unavailableComponents {
		if errors.Is(err, c.err) {
			return c.err.Error()
		}
	}
	return ErrUnavailable.Error()
}

// Policy maps a regulation (upper case) to the time allowed to complete an erasure.
type Policy map[string]time.Duration

// DefaultPolicy holds the legal windows: GDPR Art. 12(3) one month, LGPD 15 days, PDPA
// 30 days, CCPA 45 days.
func DefaultPolicy() Policy {
	return Policy{"GDPR": 30 * 24 * time.Hour, "LGPD": 15 * 24 * time.Hour, "PDPA": 30 * 24 * time.Hour, "CCPA": 45 * 24 * time.Hour}
}

// UnmarshalText sets p to DefaultPolicy overridden by a list of REGULATION=duration
// entries ("GDPR=720h,LGPD=360h").
func (p *Policy) UnmarshalText(b []byte) error {
	out := DefaultPolicy()
	for _, kv := range strings.Split(string(b), ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.ToUpper(strings.TrimSpace(k))
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if !ok || k == "" || err != nil || d <= 0 {
			return fmt.Errorf("entry %q: want REGULATION=duration", kv)
		}
		out[k] = d
	}
	*p = out
	return nil
}

// MarshalText writes p's entries in regulation order.
func (p Policy) MarshalText() ([]byte, error) { return marshalDurations(p), nil }

// marshalDurations writes m as key=duration entries in key order.
func marshalDurations[M ~map[string]time.Duration](m M) []byte {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+envconf.FormatDuration(m[k]))
	}
	return []byte(strings.Join(parts, ","))
}

// PolicySettings declare the due-date windows.
type PolicySettings struct {
	Policy Policy `env:"LETHE_SLA" default:"GDPR=720h,LGPD=360h,PDPA=720h,CCPA=1080h" doc:"Due-date windows per regulation, overriding the legal ones (GDPR 30 d, LGPD 15 d, PDPA 30 d, CCPA 45 d) entry by entry, e.g. GDPR=720h,LGPD=360h."`
}

// PolicyFromEnv loads the PolicySettings from the environment and returns their Policy.
func PolicyFromEnv() (Policy, error) {
	var s PolicySettings
	if err := envconf.FromEnv(&s); err != nil {
		return nil, err
	}
	return s.Policy, nil
}

// AuditLog is what the intake reads and writes in the audit table: requests, their reports
// and receipts, audit events, the receipts' addenda and the suppression list.
// auditlog.Table implements it.
type AuditLog interface {
	auditlog.Store
	AddendaOf(ctx context.Context, requestID string) ([]auditlog.Addendum, error)
	auditlog.SuppressionStore
	auditlog.Rejections
}

// Service is the intake.
type Service struct {
	Key       subject.Key
	Inventory *inventory.Inventory
	Producer  worker.Producer
	Store     AuditLog
	// Discovery returns the discovery reports of the deleters that run in this process;
	// nil where they run apart (GET /v1/discovery/uncovered then answers 404).
	Discovery      func() []discovery.Report
	Policy         Policy
	RequestedTopic string // default event.TopicRequested
	Log            *zap.Logger
	Metrics        *metrics.Metrics    // nil records nothing
	Auth           *auth.Authenticator // nil: no authentication (every caller may act for every tenant)
	Limiter        *auth.Limiter       // per-tenant submission rate; nil: unlimited
	Sealer         *envelope.Sealer    // seals identifiers on erasure.requested; nil: they travel in the clear
	Registry       *schemareg.Codec    // reads registry-framed intake records, frames every record the intake writes; nil: single-object only
	Now            func() time.Time

	// SuppressionsTopic carries lifted suppressions; default event.TopicSuppressions.
	SuppressionsTopic string

	// Workflow keeps the gated requests (dry runs, cancellation windows, approvals) and the
	// legal holds; nil: no gate, every request runs at once (see workflow.go).
	Workflow workflow.Store
	// Windows are the cancellation windows before execution, per tenant or regulation.
	Windows Windows
	// RequireApproval makes TENANT scope requests wait for a second principal with the
	// approver role (auth.RoleApprover).
	RequireApproval bool
	// DeadLetters, when set, serves the dead letters of the caller's tenants.
	DeadLetters *DeadLetters

	// AllowedHosts are the Host names the API answers; empty: any with authentication on,
	// loopback names only without (see guard).
	AllowedHosts []string
	// AllowedOrigins are the browser origins besides the API's own that may change state.
	AllowedOrigins []string
}

// Validate checks in and normalises its regulation and scope.
func (s *Service) Validate(in *event.IntakeRequest) error {
	if err := subject.ValidateTenant(in.TenantID); err != nil {
		return err
	}
	in.Regulation = strings.ToUpper(strings.TrimSpace(in.Regulation))
	if _, ok := s.Policy[in.Regulation]; !ok {
		known := make([]string, 0, len(s.Policy))
		for k := range s.Policy {
			known = append(known, k)
		}
		sort.Strings(known)
		return fmt.Errorf("%w: regulation must be one of %s", ErrInvalid, strings.Join(known, ", "))
	}
	switch in.Scope {
	case "", event.ScopeSubject:
		in.Scope = event.ScopeSubject
		if err := subject.ValidateID("subject_id", in.SubjectID); err != nil {
			return err
		}
	case event.ScopeTenant:
		if in.SubjectID != "" || len(in.SessionIDs) > 0 {
			return fmt.Errorf("%w: a TENANT scope request names no subject_id or session_ids", ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: scope must be SUBJECT or TENANT", ErrInvalid)
	}
	if len(in.SessionIDs) > subject.MaxSessions {
		return fmt.Errorf("%w: more than %d session_ids", ErrInvalid, subject.MaxSessions)
	}
	for _, id := range in.SessionIDs {
		if err := subject.ValidateID("session_ids[]", id); err != nil {
			return err
		}
	}
	if len(in.IdempotencyKey) > 200 {
		return fmt.Errorf("%w: idempotency key is longer than 200 bytes", ErrInvalid)
	}
	return nil
}

// Submit validates in, publishes the stamped request and returns it once acknowledged.
// With a Workflow, a request that must pass a gate (a dry run, an approval, a cancellation
// window) is recorded there instead; see SubmitWith.
func (s *Service) Submit(ctx context.Context, in event.IntakeRequest) (event.Requested, error) {
	return s.SubmitWith(ctx, in, SubmitOptions{})
}

// SubmitWith is Submit with the options of the privacy team's workflow.
func (s *Service) SubmitWith(ctx context.Context, in event.IntakeRequest, opts SubmitOptions) (event.Requested, error) {
	sub, err := s.submit(ctx, in, opts)
	return sub.req, err
}

// submission is what submit did with a request.
type submission struct {
	req event.Requested
	// state is the gate the request waits at, or PREVIEWED for a dry run; "" when it was
	// published to run.
	state workflow.State
	// again: the idempotency key's earlier request was answered, and state is unknown.
	again bool
}

// submit is SubmitWith, saying what it did.
func (s *Service) submit(ctx context.Context, in event.IntakeRequest, opts SubmitOptions) (submission, error) {
	if err := s.Validate(&in); err != nil {
		return submission{}, err
	}
	now := s.now()
	req := event.Requested{
		RequestID:        s.requestID(in),
		TenantID:         in.TenantID,
		KeyID:            s.Key.ID(),
		Identifiers:      event.Identifiers{SubjectID: in.SubjectID, SessionIDs: append([]string{}, in.SessionIDs...)},
		Scope:            in.Scope,
		Regulation:       in.Regulation,
		RequestedAt:      now,
		DueAt:            now.Add(s.Policy[in.Regulation]),
		InventoryVersion: s.Inventory.Version,
		ExpectedStores:   s.Inventory.Names(),
		OnlyStores:       []string{},
		Attempt:          1,
		SessionHashes:    s.sessionHashes(in.TenantID, nil, in.SessionIDs),
	}
	if in.Scope == event.ScopeTenant {
		req.SubjectHash = s.Key.Pseudonym(in.TenantID, "") // the tenant itself
	} else {
		req.SubjectHash = s.Key.Pseudonym(in.TenantID, in.SubjectID)
	}
	if in.IdempotencyKey != "" {
		prev, err := s.Store.GetRequest(ctx, req.RequestID)
		switch {
		case err == nil && (prev.SubjectHash != req.SubjectHash || prev.Scope != req.Scope || prev.Regulation != req.Regulation):
			return submission{}, ErrConflict
		case err == nil:
			req.RequestedAt, req.DueAt, req.InventoryVersion, req.ExpectedStores = prev.RequestedAt, prev.DueAt, prev.InventoryVersion, prev.ExpectedStores
			return submission{req: req, again: true}, nil // already accepted
		case !errors.Is(err, auditlog.ErrNotFound):
			return submission{}, s.unavailable(ErrStateStoreUnavailable, req.TenantID, err)
		}
	}
	if state, err := s.gate(ctx, &req, in.Source, opts); state != "" || err != nil {
		return submission{req: req, state: state}, err
	}
	if err := s.publish(ctx, &req); err != nil {
		return submission{}, err
	}
	s.keepHeld(ctx, &req, in.Source)
	if err := s.Store.PutRequest(ctx, auditlog.RequestOf(&req)); err != nil {
		// The aggregator records it from the event too; status may lag until then.
		s.log().Warn("request state not recorded", zap.String("request_id", req.RequestID), zap.Error(err))
	}
	s.log().Info("erasure requested", zap.String("request_id", req.RequestID), zap.String("tenant", req.TenantID),
		zap.String("subject_hash", req.SubjectHash), zap.String("regulation", req.Regulation), zap.String("scope", string(req.Scope)),
		zap.String("source", in.Source))
	metrics.Or(s.Metrics).Requests.WithLabelValues(req.TenantID, req.Regulation, or(opts.Channel, "api")).Inc()
	return submission{req: req}, nil
}

// publish seals req's identifiers (when a Sealer is configured) and publishes it.
func (s *Service) publish(ctx context.Context, req *event.Requested) error {
	if s.Sealer != nil && req.Sealed == nil {
		sealed, err := s.Sealer.SealIdentifiers(ctx, req.RequestID, req.Identifiers)
		if errors.Is(err, envelope.ErrShredded) {
			return fmt.Errorf("%w: the request is complete and its identifiers key was destroyed", ErrInvalid)
		}
		if err != nil {
			return s.unavailable(ErrKeyStoreUnavailable, req.TenantID, fmt.Errorf("seal identifiers: %w", err))
		}
		req.Sealed, req.Identifiers = sealed, event.Identifiers{SessionIDs: []string{}}
	}
	return s.send(ctx, req)
}

// send publishes req as it is.
func (s *Service) send(ctx context.Context, req *event.Requested) error {
	b, err := s.Registry.EncodeFor(s.requestedTopic(), event.Request, req)
	if err != nil {
		return fmt.Errorf("intake: encode: %w", err)
	}
	rec := &kgo.Record{Topic: s.requestedTopic(), Key: []byte(req.RequestID), Value: b}
	if err := s.Producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return s.unavailable(ErrBrokerUnavailable, req.TenantID, err)
	}
	return nil
}

// Redrive publishes requestID again under the same id with a higher attempt, for every
// store or only the named ones. It expects, besides the request's own stores, the stores
// the inventory gained since (an entry added to cover what a probe found outside it), at
// the inventory's current version. The raw identifiers must be supplied again: Lethe keeps
// none outside erasure.requested. It fails with an error wrapping auditlog.ErrNotFound for
// an unknown request, ErrInvalid when the identifiers are invalid or are not the request's
// subject's (a TENANT request takes none) or a store is not one the request expects,
// ErrState when a gate holds the request (see admit), and
// ErrUnavailable (naming the component) when the state store could not be read or the
// event could not be published.
func (s *Service) Redrive(ctx context.Context, requestID string, ids event.Identifiers, stores []string) (event.Requested, error) {
	prev, err := s.Store.GetRequest(ctx, requestID)
	switch {
	case errors.Is(err, auditlog.ErrNotFound):
		return event.Requested{}, err
	case err != nil:
		return event.Requested{}, s.unavailable(ErrStateStoreUnavailable, "", err)
	}
	prev.ExpectedStores, prev.InventoryVersion = s.expectedNow(prev), s.Inventory.Version
	if err := validRedrive(prev, ids, stores); err != nil {
		return event.Requested{}, err
	}
	switch _, err := s.Store.GetReceipt(ctx, requestID); {
	case err == nil:
		return event.Requested{}, fmt.Errorf("%w: the request is complete", ErrInvalid)
	case !errors.Is(err, auditlog.ErrNotFound):
		return event.Requested{}, s.unavailable(ErrStateStoreUnavailable, prev.TenantID, err)
	}
	req := event.Requested{
		RequestID: prev.RequestID, TenantID: prev.TenantID, SubjectHash: prev.SubjectHash, KeyID: prev.KeyID,
		Identifiers: ids, Scope: prev.Scope, Regulation: prev.Regulation, RequestedAt: prev.RequestedAt,
		DueAt: prev.DueAt, InventoryVersion: prev.InventoryVersion, ExpectedStores: prev.ExpectedStores,
		OnlyStores: append([]string{}, stores...), Attempt: prev.Attempt + 1,
		SessionHashes: s.sessionHashes(prev.TenantID, prev.SessionHashes, ids.SessionIDs),
	}
	if prev.Scope == event.ScopeSubject && s.Key.Pseudonym(prev.TenantID, ids.SubjectID) != prev.SubjectHash {
		return event.Requested{}, fmt.Errorf("%w: the identifiers do not match the request's subject", ErrInvalid)
	}
	if err := s.admit(ctx, &req, nil); err != nil {
		return event.Requested{}, err
	}
	if err := s.publish(ctx, &req); err != nil {
		return event.Requested{}, err
	}
	if err := s.Store.PutRequest(ctx, auditlog.RequestOf(&req)); err != nil {
		s.log().Warn("request state not recorded", zap.String("request_id", req.RequestID), zap.Error(err))
	}
	return req, nil
}

// expectedNow is the stores prev expects followed by the stores of the current inventory
// it does not name.
func (s *Service) expectedNow(prev auditlog.Request) []string {
	out := slices.Clone(prev.ExpectedStores)
	for _, st := range s.Inventory.Stores {
		if !slices.Contains(out, st.Name) {
			out = append(out, st.Name)
		}
	}
	return out
}

// sessionHashes returns known followed by the session pseudonyms of sessions in tenant
// that known lacks: the sessions of a request, and of its re-drives, all become
// suppressed with its receipt.
func (s *Service) sessionHashes(tenant string, known, sessions []string) []string {
	out := append([]string{}, known...)
	for _, id := range sessions {
		if h := s.Key.SessionPseudonym(tenant, id); !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}

// validRedrive checks the identifiers and stores of a re-drive of prev; the subject's
// pseudonym is checked by the caller.
func validRedrive(prev auditlog.Request, ids event.Identifiers, stores []string) error {
	if prev.Scope == event.ScopeTenant && (ids.SubjectID != "" || len(ids.SessionIDs) > 0) {
		return fmt.Errorf("%w: a TENANT scope request names no subject_id or session_ids", ErrInvalid)
	}
	if len(ids.SessionIDs) > subject.MaxSessions {
		return fmt.Errorf("%w: more than %d session_ids", ErrInvalid, subject.MaxSessions)
	}
	for _, id := range ids.SessionIDs {
		if err := subject.ValidateID("session_ids[]", id); err != nil {
			return err
		}
	}
	for _, st := range stores {
		if !slices.Contains(prev.ExpectedStores, st) {
			return fmt.Errorf("%w: store %q is not one the request expects", ErrInvalid, st)
		}
	}
	return nil
}

// HandleIntake is the consumer.Handler for erasure.intake. A record is JSON (JSONRecord)
// or Avro in either framing (ContentTypeHeader). Invalid requests, undecodable records and
// registry ids the registry does not know are permanent errors: the consumer dead-letters
// them with the reason, and with the name of the producer the record's credential
// authenticated (consumer.WithPrincipal). A replayed record (dlq.HeaderReplayedFrom) that
// names a placeholder of a redacted dead letter as an identifier is invalid.
func (s *Service) HandleIntake(ctx context.Context, rec *kgo.Record) (err error) {
	var in event.IntakeRequest
	defer func() {
		if retry.IsPermanent(err) {
			if rerr := s.recordRejection(ctx, rec, in, err); rerr != nil {
				err = rerr
			}
		}
	}()
	if in, err = s.decodeRecord(ctx, rec); err != nil {
		return err
	}
	var producer string // the principal the record's credential authenticated
	if s.Auth != nil {
		p, err := s.Auth.AuthenticateHeader(header(rec, auth.RecordHeader))
		if err != nil {
			return retry.Permanent(fmt.Errorf("intake: record refused: %w", err))
		}
		producer = p.Name
		// As over HTTP, the body is checked before the tenant is authorised, so that the
		// dead letter says what is wrong with it (an empty tenant is invalid, not forbidden).
		if err := s.Validate(&in); err != nil {
			return consumer.WithPrincipal(retry.Permanent(err), producer)
		}
		if err := p.Authorize(in.TenantID); err != nil {
			return consumer.WithPrincipal(retry.Permanent(fmt.Errorf("intake: record refused: %w", err)), producer)
		}
		in.Source = p.Name // the authenticated producer, not what the record claims
	}
	if err := refusePlaceholders(rec, in); err != nil {
		return consumer.WithPrincipal(retry.Permanent(err), producer)
	}
	_, err = s.SubmitWith(ctx, in, SubmitOptions{Channel: "kafka"})
	if errors.Is(err, ErrInvalid) || errors.Is(err, ErrConflict) || errors.Is(err, ErrForbidden) {
		return consumer.WithPrincipal(retry.Permanent(err), producer)
	}
	return err
}

func header(rec *kgo.Record, key string) string {
	for _, h := range rec.Headers {
		if strings.EqualFold(h.Key, key) {
			return string(h.Value)
		}
	}
	return ""
}

func (s *Service) requestID(in event.IntakeRequest) string {
	if in.IdempotencyKey == "" {
		return "er_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	}
	return "er_" + s.Key.Fingerprint(in.TenantID, "idempotency-key", in.IdempotencyKey, "")[:32]
}

func (s *Service) requestedTopic() string {
	if s.RequestedTopic == "" {
		return event.TopicRequested
	}
	return s.RequestedTopic
}

func (s *Service) log() *zap.Logger {
	if s.Log == nil {
		return zap.NewNop()
	}
	return s.Log
}

func (s *Service) now() time.Time {
	if s.Now == nil {
		return time.Now().UTC().Truncate(time.Millisecond)
	}
	return s.Now()
}

// or is s, or def when s is empty.
func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
