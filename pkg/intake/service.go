package intake

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/workflow"
)

// ScheduleEvery is how often the intake releases gated requests whose window ended.
const ScheduleEvery = time.Second

// Config is the intake service's declared configuration.
type Config struct {
	HTTPAddr string `env:"LETHE_HTTP_ADDR" default:"127.0.0.1:8080" doc:"Listen address of the intake's HTTP API; without authentication only a loopback address is accepted."`
	PolicySettings
	CancelWindow   Windows   `env:"LETHE_CANCEL_WINDOW" doc:"Cancellation windows before a request runs, per regulation or tenant, e.g. GDPR=24h,tenant:acme=0s; they need a workflow store."`
	RateLimit      auth.Rate `env:"LETHE_RATE_LIMIT" default:"10/s,burst=20" doc:"Submissions per tenant: N/s, N/m or N/h with an optional ,burst=B (default twice the rate per second), or off."`
	AllowedHosts   []string  `env:"LETHE_ALLOWED_HOSTS" doc:"Host names the API answers (DNS-rebinding guard), comma separated; empty: any with authentication, loopback names only without."`
	AllowedOrigins []string  `env:"LETHE_ALLOWED_ORIGINS" doc:"Browser origins besides the API's own that may change state, comma separated; every state change needs Content-Type: application/json."`
	WorkflowFile   string    `env:"LETHE_WORKFLOW_FILE" doc:"The workflow's write-ahead log directory, for one intake process, instead of the DynamoDB audit table; empty: the audit table's when it is DynamoDB, else none (standalone: workflow.json in its data directory)."`
	Auth           auth.Settings
}

// Deps are what the intake is built on besides its Env.
type Deps struct {
	Store    AuditLog            // request state and receipts
	Workflow workflow.Store      // nil: no workflow (no dry runs, windows, approvals or holds)
	Auth     *auth.Authenticator // nil: no authentication
}

// New builds the intake service of cfg over env: the Service, which signs every request it
// publishes with the record MAC key, and a Spec of the erasure.intake group, whose Run
// releases gated requests every ScheduleEvery. The caller serves the Service's Handler on
// cfg.HTTPAddr; New refuses an address authentication does not allow (CheckBind).
//
// With a workflow store the intake keeps dry runs, cancellation windows
// (cfg.CancelWindow), legal holds and, whenever authentication is on, approvals of TENANT
// requests; it logs which store it has.
func New(cfg Config, env service.Env, d Deps) (*Service, service.Spec, error) {
	if err := CheckBind(cfg.HTTPAddr, d.Auth); err != nil {
		return nil, service.Spec{}, err
	}
	limiter := cfg.RateLimit.Limiter()
	env.Log.Info("access", zap.Stringer("auth", d.Auth), zap.Stringer("rate_limit", limiter))
	// Every request the intake publishes is signed: deleters and the aggregator refuse one
	// without a valid MAC.
	signed := &integrity.Signer{Producer: env.Producer, Ring: env.Config.MAC, Types: map[string]*event.Type{event.TopicRequested: event.Request}}
	svc := &Service{Key: env.Config.Key, Inventory: env.Config.Inventory, Producer: signed, Store: d.Store, Policy: cfg.Policy,
		Log: env.Log, Metrics: env.Metrics, Auth: d.Auth, Limiter: limiter, Sealer: env.Sealer, Registry: env.Registry,
		DeadLetters:  &DeadLetters{Brokers: env.Config.Broker, Registry: env.Registry},
		AllowedHosts: cfg.AllowedHosts, AllowedOrigins: cfg.AllowedOrigins}
	if d.Workflow != nil {
		svc.Workflow, svc.Windows, svc.RequireApproval = d.Workflow, cfg.CancelWindow, d.Auth != nil && !d.Auth.Disabled()
	}
	store := env.Config.WorkflowName(cfg.WorkflowFile)
	env.Log.Info("workflow", zap.String("store", store), zap.Bool("approval", svc.RequireApproval))
	switch {
	case d.Workflow == nil:
		env.Log.Warn("no workflow store: no dry runs, cancellation windows, approvals or legal holds; set LETHE_AUDIT_TABLE or LETHE_WORKFLOW_FILE")
	case cfg.WorkflowFile != "" && env.Config.AuditTable != "":
		env.Log.Warn("workflow file beside a DynamoDB audit table: run one intake process, or unset LETHE_WORKFLOW_FILE to keep the workflow in the audit table",
			zap.String("store", store))
	}
	return svc, service.Spec{
		Groups: []service.Group{{Name: "lethe-intake", Topics: []string{event.TopicIntake}, Handler: svc.HandleIntake, Redact: svc.Redact}},
		Run: func(ctx context.Context) error {
			svc.RunSchedule(ctx, ScheduleEvery)
			return nil
		},
		Checks: []metrics.Check{service.AuditCheck(d.Store)},
	}, nil
}
