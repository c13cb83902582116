package awsclient

import (
	"context"
	"strings"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/lethe-erasure/lethe/pkg/calls"
)

// CountCalls is an AWS SDK API option (aws.Config.APIOptions) that counts each API call by
// service and operation, and for DynamoDB by the table it names.
func CountCalls(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("lethe-calls",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			backend := strings.ToLower(strings.ReplaceAll(awsmiddleware.GetServiceID(ctx), " ", ""))
			target := ""
			if backend == calls.DynamoDB {
				target = table(in.Parameters)
			}
			calls.Count(backend, target, awsmiddleware.GetOperationName(ctx))
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
	}
	return deref(t)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
