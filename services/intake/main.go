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

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Main("intake", func(ctx context.Context, env service.Env) ([]service.Group, func(context.Context) error, error) {
		policy, err := intake.PolicyFromEnv()
		if err != nil {
			return nil, nil, err
		}
		store, err := env.Config.AuditStore(ctx)
		if err != nil {
			return nil, nil, err
		}
		svc := &intake.Service{Key: env.Config.Key, Inventory: env.Config.Inventory, Producer: env.Producer, Store: store, Policy: policy, Log: env.Log}
		serve := func(ctx context.Context) error {
			srv := &http.Server{Addr: env.Config.HTTPAddr, Handler: svc.Handler(), ReadHeaderTimeout: 5 * time.Second}
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				srv.Shutdown(sctx)
			}()
			env.Log.Info("listening", zap.String("addr", srv.Addr))
			if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		}
		return []service.Group{{Name: "lethe-intake", Topics: []string{event.TopicIntake}, Handler: svc.HandleIntake}}, serve, nil
	})
}
