// Package deploy holds Lethe's deployment artefacts and the tests that keep them honest:
//
//	inventory.yaml             the reference inventory (identical to pkg/inventory/reference.yaml)
//	k8s/base                   kustomize base: one Deployment, PodDisruptionBudget and (for
//	                           consumers that scale) KEDA ScaledObject per service, the intake
//	                           Service, the metrics Service and ServiceMonitor, the PrometheusRule
//	k8s/overlays/example       an overlay: namespace, image tags, replicas, secrets
//	prometheus/                prometheus.yml for docker-compose and alerts.yml, the alert rules
//	                           that the PrometheusRule mirrors
//	grafana/                   the provisioned datasource and the Lethe dashboard
//
// The package has no code; its tests parse every manifest, the dashboard and
// docker-compose.yml and check them against the services, consumer groups and metrics Lethe
// has (see manifests_test.go). They also keep the documentation honest (docs_test.go): the
// README's layout table names every Go package directory, and every relative link of the
// README and of docs/ leads to a file and heading that exist.
package deploy
