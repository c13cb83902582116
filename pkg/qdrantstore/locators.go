package qdrantstore

import (
	"errors"
	"fmt"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore/qdrantkey"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Kind is the inventory kind this package serves.
const Kind = "qdrant"

// Locators are the locators of an inventory store of kind "qdrant": collection templates
// (placeholders {tenant}, {subject}, {subject_hash}, {session}) and the payload fields that
// hold the subject id, its keyed pseudonym, or (legacy chunks) a session id. A field is a
// payload key in Qdrant's grammar, e.g. metadata.customer_id.
type Locators struct {
	Collections   []string `yaml:"collections"`
	SubjectFields []string `yaml:"subject_fields"`
	HashFields    []string `yaml:"hash_fields"`
	SessionFields []string `yaml:"session_fields"`
}

var _ deletion.Validator = (*Store)(nil)

// Validate checks the locators of inv: known fields only, at least one collection, at
// least one payload field, every field within Qdrant's key grammar, and only known
// placeholders in collection templates. It touches no backend.
func (st *Store) Validate(inv inventory.Store) error { return Validate(inv) }

// Validate is Store.Validate without a Store, for tools that check an inventory offline.
func Validate(inv inventory.Store) error {
	_, err := LocatorsOf(inv)
	return err
}

// LocatorsOf decodes and checks the locators of inv; its errors are permanent.
func LocatorsOf(inv inventory.Store) (Locators, error) {
	var l Locators
	err := inv.Locators.Decode(&l)
	if err == nil {
		err = l.check()
	}
	if err != nil {
		return Locators{}, retry.Permanent(fmt.Errorf("qdrant: store %q: %w", inv.Name, err))
	}
	return l, nil
}

func (l Locators) check() error {
	var errs []error
	if len(l.Collections) == 0 {
		errs = append(errs, errors.New("locators.collections is empty"))
	}
	for _, c := range l.Collections {
		if err := inventory.CheckTemplate(c, inventory.Tenant, inventory.Subject, inventory.SubjectHash, inventory.Session); err != nil {
			errs = append(errs, fmt.Errorf("locators.collections: %w", err))
		}
	}
	if len(l.SubjectFields)+len(l.HashFields)+len(l.SessionFields) == 0 {
		errs = append(errs, errors.New("locators: needs at least one of subject_fields, hash_fields, session_fields"))
	}
	for name, fields := range map[string][]string{"subject_fields": l.SubjectFields, "hash_fields": l.HashFields, "session_fields": l.SessionFields} {
		for _, f := range fields {
			if err := qdrantkey.Check(f); err != nil {
				errs = append(errs, fmt.Errorf("locators.%s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}
