// Command intake accepts erasure requests over HTTP (POST /v1/erasures) and from
// erasure.intake, publishes them on erasure.requested, and serves status and receipts.
// Configuration: intake.Config and the settings every service reads
// (docs/configuration.md).
package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Main("intake", func(ctx context.Context, env service.Env, cfg intake.Config) (service.Spec, error) {
		store, err := env.Config.AuditStore(ctx)
		if err != nil {
			return service.Spec{}, err
		}
		authn, err := cfg.Auth.Authenticator()
		if err != nil {
			return service.Spec{}, err
		}
		// The workflow store (the DynamoDB audit table, shared by every replica, or
		// LETHE_WORKFLOW_FILE, one process owning it).
		wf, err := env.Config.WorkflowStore(ctx, cfg.WorkflowFile)
		if err != nil {
			return service.Spec{}, err
		}
		svc, spec, err := intake.New(cfg, env, intake.Deps{Store: store, Workflow: wf, Auth: authn})
		if err != nil {
			return service.Spec{}, err
		}
		schedule := spec.Run
		spec.Run = func(ctx context.Context) error {
			go func() { _ = schedule(ctx) }() // releases gated requests until ctx ends; its error is always nil
			srv := &http.Server{Addr: cfg.HTTPAddr, Handler: svc.Handler(), ReadHeaderTimeout: 5 * time.Second}
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx) // past the deadline connections are dropped: the process is stopping
			}()
			env.Log.Info("listening", zap.String("addr", srv.Addr))
			if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
				return envconf.ListenError(err, "LETHE_HTTP_ADDR")
			}
			return nil
		}
		return spec, nil
	})
}
