// Command intake accepts erasure requests over HTTP (POST /v1/erasures) and from
// erasure.intake, publishes them on erasure.requested, and serves status and receipts.
// Configuration: see package config.
package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/integrity"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Main("intake", func(ctx context.Context, env service.Env) (service.Spec, error) {
		policy, err := intake.PolicyFromEnv()
		if err != nil {
			return service.Spec{}, err
		}
		store, err := env.Config.AuditStore(ctx)
		if err != nil {
			return service.Spec{}, err
		}
		authn, err := auth.FromEnv()
		if err != nil {
			return service.Spec{}, err
		}
		limiter, err := auth.LimiterFromEnv()
		if err != nil {
			return service.Spec{}, err
		}
		env.Log.Info("access", zap.Stringer("auth", authn), zap.Stringer("rate_limit", limiter))
		// Every request the intake publishes is signed: deleters and the aggregator refuse
		// one without a valid MAC.
		signed := &integrity.Signer{Producer: env.Producer, Ring: env.Config.MAC, Types: map[string]*event.Type{event.TopicRequested: event.Request}}
		svc := &intake.Service{Key: env.Config.Key, Inventory: env.Config.Inventory, Producer: signed, Store: store,
			Policy: policy, Log: env.Log, Metrics: env.Metrics, Auth: authn, Limiter: limiter, Sealer: env.Sealer, Registry: env.Registry}
		if err := configureWorkflow(ctx, svc, env, authn); err != nil {
			return service.Spec{}, err
		}
		if err := intake.CheckBind(env.Config.HTTPAddr, authn); err != nil {
			return service.Spec{}, err
		}
		svc.AllowedHosts, svc.AllowedOrigins = intake.AccessFromEnv()
		serve := func(ctx context.Context) error {
			go svc.RunSchedule(ctx, time.Second)
			srv := &http.Server{Addr: env.Config.HTTPAddr, Handler: svc.Handler(), ReadHeaderTimeout: 5 * time.Second}
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx) // past the deadline connections are dropped: the process is stopping
			}()
			env.Log.Info("listening", zap.String("addr", srv.Addr))
			if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}
		return service.Spec{
			Groups: []service.Group{{Name: "lethe-intake", Topics: []string{event.TopicIntake}, Handler: svc.HandleIntake, Redact: svc.Redact}},
			Run:    serve,
			Checks: []metrics.Check{service.AuditCheck(store)},
		}, nil
	})
}
