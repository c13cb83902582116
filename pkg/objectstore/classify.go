package objectstore

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Class is what an S3 error code means to the request that received it.
type Class int

const (
	// Transient errors may succeed when repeated: the service down, throttling, internal
	// errors, and every code not listed below.
	Transient Class = iota
	// Missing errors name an object or version that does not exist.
	Missing
	// Conflict errors are conditional requests that lost a race with another writer.
	Conflict
	// Permanent errors repeating cannot fix: the bucket does not exist, the request is
	// refused or malformed.
	Permanent
)

// codes classifies the S3 error codes that are not transient.
var codes = map[string]Class{
	"NoSuchKey":     Missing,
	"NoSuchVersion": Missing,
	"NotFound":      Missing, // a HEAD of a missing object

	"PreconditionFailed":         Conflict,
	"ConditionalRequestConflict": Conflict,

	"NoSuchBucket":          Permanent,
	"InvalidBucketName":     Permanent,
	"AccessDenied":          Permanent,
	"AllAccessDisabled":     Permanent,
	"InvalidAccessKeyId":    Permanent,
	"SignatureDoesNotMatch": Permanent,
	"InvalidArgument":       Permanent,
	"MalformedXML":          Permanent,
}

// CodeClass is the class of the S3 error code.
func CodeClass(code string) Class { return codes[code] }

// Classify wraps err, an S3 error of op on bucket, as "s3 bucket <bucket>: <op>: err",
// classified: Missing wraps ErrNotFound, Conflict wraps ErrConflict and is marked
// retry.Contended, Permanent is marked retry.Permanent; Transient is left unmarked. It
// names no key (keys may hold identifiers): a transport error, whose message would quote
// the request's URL, keeps only its cause. Classify(_, _, nil) is nil.
func Classify(bucket, op string, err error) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	err = fmt.Errorf("s3 bucket %s: %s: %w", bucket, op, err)
	var nsk *types.NoSuchKey
	var api smithy.APIError
	class := Transient
	switch {
	case errors.As(err, &nsk):
		class = Missing
	case errors.As(err, &api):
		class = CodeClass(api.ErrorCode())
	}
	switch class {
	case Missing:
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case Conflict:
		return retry.Contended(fmt.Errorf("%w: %w", ErrConflict, err))
	case Permanent:
		return retry.Permanent(err)
	}
	return err
}
