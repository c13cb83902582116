package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"

	"github.com/lethe-erasure/lethe/pkg/envelope/kmskek"
)

var keysKMSGenerateCmd = &command{
	name:    "keys kms-generate",
	args:    "--kms-key ID|ARN|alias --id KEK_ID",
	summary: "have AWS KMS generate a key-encryption key and print only its ciphertext",
	help: `Asks AWS KMS (GenerateDataKey, AES-256, under the KMS key --kms-key) for a new
key-encryption key bound to the id --id, and prints the two settings that make the
services use it: LETHE_KEK_ID and LETHE_KEK_KMS_CIPHERTEXT. The services decrypt the
ciphertext with KMS (Decrypt) when they start and keep the key in memory only; the
plaintext is never printed or stored. To rotate, generate a new key with a new id, move
the old id:ciphertext into LETHE_KEK_KMS_OLD, and run lethectl keys rewrap. AWS
credentials and region come from the default chain; LETHE_KMS_ENDPOINT names a local KMS.`,
	example: "lethectl keys kms-generate --kms-key alias/lethe --id kek2",
	exits:   "0 generated; 1 error; 2 usage.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var kmsKey, id, endpoint string
		fs.StringVar(&kmsKey, "kms-key", "", "the KMS key that wraps the key-encryption key: key id, ARN or alias/NAME")
		fs.StringVar(&id, "id", "", "the key-encryption key's id (LETHE_KEK_ID), bound to it by KMS's encryption context")
		fs.StringVar(&endpoint, "kms-endpoint", "", "KMS endpoint; empty: LETHE_KMS_ENDPOINT, else AWS")
		return func(ctx context.Context, args []string) error {
			if len(args) > 0 || kmsKey == "" || id == "" {
				return usageErrorf("give --kms-key and --id, and no argument")
			}
			if endpoint == "" {
				endpoint = c.getenv("LETHE_KMS_ENDPOINT")
			}
			cl, err := kmskek.Client(ctx, endpoint)
			if err != nil {
				return err
			}
			blob, err := kmskek.Generate(ctx, cl, kmsKey, id)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.stdout, "LETHE_KEK_ID=%s\nLETHE_KEK_KMS_CIPHERTEXT=%s\n", id, base64.StdEncoding.EncodeToString(blob))
			return err
		}
	},
}
