// Package pii finds personal data in free text that Lethe writes — error messages in
// FAILED reports, log fields, dead-letter reasons — and masks it with typed placeholders.
//
// It finds:
//   - email addresses ([email]);
//   - phone numbers ([phone]): international ones written with + or 00 and a country code
//     (8 to 15 digits, separators allowed), and national ones written with separators: a
//     trunk prefix 0 (9 to 12 digits), an area code in parentheses, North American
//     ddd-ddd-dddd, Indian ddddd ddddd mobiles, Singaporean dddd dddd and Brazilian
//     dd ddddd-dddd numbers;
//   - IBANs whose mod-97 check holds, compact or in groups of four ([iban]);
//   - payment card numbers of 13 to 19 digits, starting with 2 to 6, whose Luhn check
//     holds, compact or in groups ([card]);
//   - national ids whose own check holds ([national-id]): Brazil's CPF and CNPJ (mod 11,
//     both check digits), India's Aadhaar (Verhoeff), Singapore's NRIC/FIN (check letter,
//     S, T, F, G and M series), Spain's DNI and NIE (check letter); and US social
//     security numbers written ddd-dd-dddd or ddd dd dddd whose area, group and serial
//     are not zero and whose area is not 666 or 9xx.
//
// Numbers whose check fails (order numbers, offsets) survive, and so do timestamps,
// durations, UUIDs, hex hashes, version numbers and addresses.
//
// An item counts only as a whole token: it must not touch a letter, a digit or '_', nor a
// '-', '.' or '/' that touches one, on either side — nothing is found inside er_…
// request ids, UUIDs, hashes, host names or paths. Numbers written as digit groups
// separated by single spaces ("4111 1111 1111 1111") are read group by group: from each
// group, the longest run of following groups that forms an item is masked.
//
// Mask and Contains scan their input once per pass, in time linear in its length, with
// bounded look-ahead (a number at most 40 bytes, an email's local part 64 and its domain
// 253); they use no regular expressions. They are safe for concurrent use.
package pii

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Placeholders that Mask writes in place of what it finds.
const (
	Email      = "[email]"
	Phone      = "[phone]"
	IBAN       = "[iban]"
	NationalID = "[national-id]"
	Card       = "[card]"
)

type kind uint8

const (
	none kind = iota
	email
	phone
	iban
	nationalID
	card
)

var placeholder = [...]string{none: "", email: Email, phone: Phone, iban: IBAN, nationalID: NationalID, card: Card}

// Mask returns s with every item it finds replaced by the item's placeholder. It masks
// again until nothing more is found, so Mask(Mask(s)) == Mask(s) and Contains(Mask(s)) is
// false. Bytes that are not valid UTF-8 are kept as they are.
func Mask(s string) string {
	// Each pass that finds something removes at least one digit or '@' and writes none,
	// so the loop ends; in practice the second pass finds nothing.
	for {
		m, found := pass(s, false)
		if !found {
			return s
		}
		s = m
	}
}

// Contains reports whether Mask would change s.
func Contains(s string) bool {
	_, found := pass(s, true)
	return found
}

// pass masks emails, then numbers and ids, once. With stop it returns at the first item.
func pass(s string, stop bool) (string, bool) {
	s, foundEmail := maskEmails(s, stop)
	if foundEmail && stop {
		return "", true
	}
	s, foundToken := maskTokens(s, stop)
	return s, foundEmail || foundToken
}

// out builds a pass's output lazily: nothing is copied until the first item.
type out struct {
	s    string
	b    []byte
	last int // end of the last masked item: s[last:] is not written yet
	n    int // items masked
}

func (o *out) mask(start, end int, k kind) {
	if o.b == nil {
		o.b = make([]byte, 0, len(o.s)+8)
	}
	o.b = append(o.b, o.s[o.last:start]...)
	o.b = append(o.b, placeholder[k]...)
	o.last = end
	o.n++
}

func (o *out) String() string {
	if o.n == 0 {
		return o.s
	}
	return string(append(o.b, o.s[o.last:]...))
}

// before returns the rune written just before s[i] and its size in s: ']' (the end of a
// placeholder, size 0) right after a masked item, -1 at the start of the text.
func (o *out) before(i int) (rune, int) {
	if i <= o.last {
		if o.n > 0 {
			return ']', 0
		}
		return -1, 0
	}
	return utf8.DecodeLastRuneInString(o.s[o.last:i])
}

// leftOK reports whether an item may start at s[i], judged on the output written so far
// (so that a second pass over the output decides alike): it must not follow a word
// character, nor a joiner that follows one.
func (o *out) leftOK(i int) bool {
	r, n := o.before(i)
	if isWord(r) {
		return false
	}
	if !isJoiner(r) {
		return true
	}
	r, _ = o.before(i - n)
	return !isWord(r)
}

// rightOK reports whether an item may end at s[end]: the text after it does not start
// with a word character, nor with a joiner followed by one.
func rightOK(s string, end int) bool {
	if end >= len(s) {
		return true
	}
	r, n := utf8.DecodeRuneInString(s[end:])
	if isWord(r) {
		return false
	}
	if !isJoiner(r) || end+n >= len(s) {
		return true
	}
	r, _ = utf8.DecodeRuneInString(s[end+n:])
	return !isWord(r)
}

func isWord(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 0 && (isAlnum(byte(r)) || r == '_')
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

func isJoiner(r rune) bool { return r == '-' || r == '.' || r == '/' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool { return isDigit(c) || isUpper(c) || c >= 'a' && c <= 'z' }

// maskTokens masks numbers, IBANs and letter ids.
func maskTokens(s string, stop bool) (string, bool) {
	o := out{s: s}
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			_, n := utf8.DecodeRuneInString(s[i:])
			i += n
			continue
		}
		if !(isAlnum(c) || c == '+' || c == '(') || !o.leftOK(i) {
			i++
			continue
		}
		k, end := matchAt(s, i)
		switch {
		case k != none:
			o.mask(i, end, k)
			if stop {
				return "", true
			}
			i = end
			continue
		case end > i: // written like an item whose check fails: its parts are no items either
			i = end
			continue
		}
		if isDigit(c) || c == '+' || c == '(' {
			i = max(i+1, chunkEnd(s, i, len(s))) // a digit group is read whole or not at all
		} else {
			i++
		}
	}
	return o.String(), o.n > 0
}

// matchAt returns the item that starts at s[i] and its end; with kind none, an end past i
// is that of an IBAN-like text whose check fails.
func matchAt(s string, i int) (kind, int) {
	c := s[i]
	if isAlnum(c) {
		if end, valid := matchIBAN(s, i); valid {
			return iban, end
		} else if end > 0 {
			return none, end
		}
		if end := matchLetterID(s, i); end > 0 {
			return nationalID, end
		}
	}
	if isDigit(c) || c == '+' || c == '(' {
		return matchNumber(s, i)
	}
	return none, 0
}

// Limits of an email address (RFC 5321).
const (
	maxLocal  = 64
	maxDomain = 253
)

// maskEmails masks local@domain where the local part is letters, digits and ._%+- (its
// last 64 bytes are masked when it is longer) with at least one letter or digit, and the
// domain is two or more labels of letters, digits and '-', the last one two or more
// letters, not followed by a word character.
func maskEmails(s string, stop bool) (string, bool) {
	o := out{s: s}
	for from := 0; from < len(s); {
		k := strings.IndexByte(s[from:], '@')
		if k < 0 {
			break
		}
		at := from + k
		start := localStart(s, o.last, at)
		end := domainEnd(s, at+1)
		if start < 0 || end < 0 || end < len(s) && isWord(firstRune(s[end:])) {
			from = at + 1
			continue
		}
		o.mask(start, end, email)
		if stop {
			return "", true
		}
		from = end
	}
	return o.String(), o.n > 0
}

// localStart returns where the local part ending at s[at] starts, looking no further back
// than lo, or -1 if there is none.
func localStart(s string, lo, at int) int {
	start, alnum := at, false
	for start > lo && at-start < maxLocal {
		r, n := utf8.DecodeLastRuneInString(s[lo:start])
		if !isWord(r) && !strings.ContainsRune(".%+-", r) || at-(start-n) > maxLocal {
			break
		}
		alnum = alnum || r != '_' && isWord(r)
		start -= n
	}
	if !alnum {
		return -1
	}
	return start
}

// domainEnd returns the end of the domain starting at s[p], or -1 if there is none.
func domainEnd(s string, p int) int {
	end, labels, tld := p, 0, true
	for {
		q, runes, alpha := end, 0, true
		for q < len(s) && q-p <= maxDomain {
			r, n := utf8.DecodeRuneInString(s[q:])
			if r == '_' || r != '-' && !isWord(r) {
				break
			}
			alpha = alpha && (unicode.IsLetter(r) || unicode.Is(unicode.Mn, r))
			runes++
			q += n
		}
		if q == end {
			break // no label here: the dot before (if any) ends the sentence
		}
		if q-p > maxDomain {
			return -1
		}
		end, labels, tld = q, labels+1, alpha && runes >= 2
		if end+1 >= len(s) || s[end] != '.' {
			break
		}
		if r := firstRune(s[end+1:]); r == '_' || r != '-' && !isWord(r) {
			break
		}
		end++
	}
	if labels < 2 || !tld {
		return -1
	}
	return end
}

func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}
