// Package kmskek keeps Lethe's key-encryption keys wrapped by AWS KMS: Generate asks KMS
// for a new key and returns only its ciphertext (LETHE_KEK_KMS_CIPHERTEXT), and Decrypt
// turns a ciphertext back into the key, in memory, when a service starts. Each key is
// bound to its id by KMS's encryption context, so a ciphertext decrypts only as the key it
// was generated for.
package kmskek

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/lethe-erasure/lethe/pkg/awsclient"
	"github.com/lethe-erasure/lethe/pkg/envelope"
)

// contextKey is the encryption context key that names the key-encryption key's id.
const contextKey = "lethe-kek-id"

// API is the part of the KMS client kmskek calls.
type API interface {
	GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, opts ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, opts ...func(*kms.Options)) (*kms.DecryptOutput, error)
}

// Client returns a KMS client from the default AWS configuration (credentials, region),
// at endpoint when it is not empty (a local KMS).
func Client(ctx context.Context, endpoint string) (*kms.Client, error) {
	cfg, err := awsclient.LoadConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("kmskek: AWS configuration: %w", err)
	}
	return kms.NewFromConfig(cfg, func(o *kms.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}

// Generate asks KMS for a new 256-bit key-encryption key under the KMS key kmsKeyID (an
// id, ARN or alias), bound to kekID, and returns its ciphertext; the plaintext KMS returns
// beside it is cleared, never returned.
func Generate(ctx context.Context, api API, kmsKeyID, kekID string) ([]byte, error) {
	if kmsKeyID == "" || kekID == "" {
		return nil, errors.New("kmskek: generate needs a KMS key and a key-encryption key id")
	}
	out, err := api.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{
		KeyId: aws.String(kmsKeyID), KeySpec: types.DataKeySpecAes256,
		EncryptionContext: map[string]string{contextKey: kekID},
	})
	if err != nil {
		return nil, fmt.Errorf("kmskek: generate data key: %w", err)
	}
	clear(out.Plaintext)
	return out.CiphertextBlob, nil
}

// Decrypter returns the envelope.Decrypter that asks KMS to decrypt a key-encryption key
// bound to its id.
func Decrypter(api API) envelope.Decrypter {
	return func(ctx context.Context, kekID string, ciphertext []byte) ([]byte, error) {
		out, err := api.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: ciphertext, EncryptionContext: map[string]string{contextKey: kekID}})
		if err != nil {
			return nil, fmt.Errorf("kmskek: decrypt key-encryption key %q: %w", kekID, err)
		}
		if len(out.Plaintext) != envelope.KeySize {
			clear(out.Plaintext)
			return nil, fmt.Errorf("kmskek: key-encryption key %q is %d bytes, want %d", kekID, len(out.Plaintext), envelope.KeySize)
		}
		return out.Plaintext, nil
	}
}

// Ring returns the key ring s declares, decrypting its KMS-wrapped keys with a client at
// s.KMS.Endpoint when it has any.
func Ring(ctx context.Context, s envelope.KEKSettings) (*envelope.KEK, error) {
	if !s.KMS.Set() {
		return s.KEK()
	}
	cl, err := Client(ctx, s.KMS.Endpoint)
	if err != nil {
		return nil, err
	}
	return s.KEKWith(ctx, Decrypter(cl))
}
