// Package calls counts the calls each Lethe process makes to its backends, as
// lethe_backend_calls_total{backend,target,op}: one per round trip (a Kafka request, an
// AWS API call, a Qdrant RPC, a Redis command or pipeline). Target is the DynamoDB table a
// call names and empty for the other backends, so labels never carry tenant ids or
// identifiers. Each client package counts its own calls (awsclient, broker, qdrantstore,
// redisstore); the counter is process-wide and metrics.New registers it.
package calls

import "github.com/prometheus/client_golang/prometheus"

// Total is lethe_backend_calls_total{backend,target,op}.
var Total = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "lethe_backend_calls_total",
	Help: "Calls to a backend (one per round trip), by backend, DynamoDB table and operation."}, []string{"backend", "target", "op"})

// Backends, the values of the backend label.
const (
	Kafka    = "kafka"
	DynamoDB = "dynamodb"
	S3       = "s3"
	KMS      = "kms"
	Qdrant   = "qdrant"
	Redis    = "redis"
)

// Count counts one call to backend (target: a DynamoDB table, else "") of operation op.
func Count(backend, target, op string) { Total.WithLabelValues(backend, target, op).Inc() }
