// Package calls counts the calls each Lethe process makes to its backends, as
// lethe_backend_calls_total{backend,target,op}: one per round trip (a Kafka request, an
// AWS API call, a Qdrant RPC, a Redis command or pipeline). Target is the DynamoDB table a
// call names and empty for the other backends, so labels never carry tenant ids or
// identifiers. The counter is process-wide; metrics.New registers it.
package calls

import (
	"context"
	"strings"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc"
)

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

// AWS is an AWS SDK API option (aws.Config.APIOptions) that counts each API call by
// service and operation, and for DynamoDB by the table it names.
func AWS(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("lethe-calls",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			backend := strings.ToLower(strings.ReplaceAll(awsmiddleware.GetServiceID(ctx), " ", ""))
			target := ""
			if backend == DynamoDB {
				target = table(in.Parameters)
			}
			Total.WithLabelValues(backend, target, awsmiddleware.GetOperationName(ctx)).Inc()
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

// table is the table a DynamoDB call names; the first of several.
func table(params any) string {
	var t *string
	switch in := params.(type) {
	case *dynamodb.GetItemInput:
		t = in.TableName
	case *dynamodb.PutItemInput:
		t = in.TableName
	case *dynamodb.UpdateItemInput:
		t = in.TableName
	case *dynamodb.DeleteItemInput:
		t = in.TableName
	case *dynamodb.QueryInput:
		t = in.TableName
	case *dynamodb.ScanInput:
		t = in.TableName
	case *dynamodb.DescribeTableInput:
		t = in.TableName
	case *dynamodb.CreateTableInput:
		t = in.TableName
	case *dynamodb.BatchWriteItemInput:
		for name := range in.RequestItems {
			return name
		}
	case *dynamodb.BatchGetItemInput:
		for name := range in.RequestItems {
			return name
		}
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range in.TransactItems {
			switch {
			case it.Put != nil:
				return deref(it.Put.TableName)
			case it.Update != nil:
				return deref(it.Update.TableName)
			case it.Delete != nil:
				return deref(it.Delete.TableName)
			case it.ConditionCheck != nil:
				return deref(it.ConditionCheck.TableName)
			}
		}
	}
	return deref(t)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// GRPC is a unary client interceptor that counts each Qdrant RPC by method.
func GRPC(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	Total.WithLabelValues(Qdrant, "", method[strings.LastIndexByte(method, '/')+1:]).Inc()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// RedisHook counts each Redis command, and each pipeline or transaction as one call.
type RedisHook struct{}

var _ redis.Hook = RedisHook{}

// DialHook counts nothing: a connection is not a call.
func (RedisHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts a command by its name.
func (RedisHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		Total.WithLabelValues(Redis, "", cmd.Name()).Inc()
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline or transaction once.
func (RedisHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		Total.WithLabelValues(Redis, "", "pipeline").Inc()
		return next(ctx, cmds)
	}
}

// KafkaHook counts each request a Kafka client writes to a broker, by request type
// (Produce, Fetch, OffsetCommit, Heartbeat, ...).
type KafkaHook struct{}

var _ kgo.HookBrokerWrite = KafkaHook{}

// OnBrokerWrite counts a request written to a broker by its type.
func (KafkaHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	Total.WithLabelValues(Kafka, "", kmsg.NameForKey(key)).Inc()
}
