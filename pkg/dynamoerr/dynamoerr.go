// Package dynamoerr classifies DynamoDB errors once for every Lethe store on DynamoDB:
// validation and serialization errors are permanent (repeating the request cannot fix
// them), everything else — throttling, 5xx, network, a missing table — is transient.
package dynamoerr

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/lethe-erasure/lethe/pkg/retry"
)

// permanentCodes are DynamoDB errors that repeating the same request cannot fix.
var permanentCodes = map[string]bool{
	"ValidationException":                      true,
	"SerializationException":                   true,
	"ItemCollectionSizeLimitExceededException": true,
}

// Classify wraps err as "<prefix>: <op>: err" and marks it retry.Permanent when
// retrying cannot fix it. Classify(_, _, nil) is nil.
func Classify(prefix, op string, err error) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("%s: %s: %w", prefix, op, err)
	var ae smithy.APIError
	var inv smithy.InvalidParamsError
	if errors.As(err, &ae) && permanentCodes[ae.ErrorCode()] || errors.As(err, &inv) {
		return retry.Permanent(err)
	}
	return err
}

// IsConditionFailed reports whether err is a failed condition of a conditional write.
func IsConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}
