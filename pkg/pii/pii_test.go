package pii

import (
	"strings"
	"testing"
)

// detectorCases are positive and negative cases of every detector, each in a sentence.
var detectorCases = []struct{ name, in, want string }{
	{"email", "mail alice@example.com now", "mail [email] now"},
	{"email tagged in brackets", "<Bob.Smith+tag@mail.example.co.uk>", "<[email]>"},
	{"email unicode", "an josé@bücher.de", "an [email]"},
	{"email ends a sentence", "from alice@example.com.", "from [email]."},
	{"email in a key", "key session:acme:alice@example.com:1", "key session:acme:[email]:1"},
	{"no email: one label", "user@localhost", "user@localhost"},
	{"no email: no local part", "@example.com", "@example.com"},
	{"no email: digit in the TLD", "alice@example.c0m", "alice@example.c0m"},
	{"no email: a path", "s3://bucket/tenant/", "s3://bucket/tenant/"},

	{"phone +CC", "call +44 20 7946 0958.", "call [phone]."},
	{"phone +1 with parentheses", "tel:+1 (415) 555-0132", "tel:[phone]"},
	{"phone +CC compact", "+4915112345678", "[phone]"},
	{"phone +CC (0)", "+44 (0)20 7946 0958", "[phone]"},
	{"phone 00CC", "0044 20 7946 0958", "[phone]"},
	{"phone area in parentheses", "phone (11) 98765-4321", "phone [phone]"},
	{"phone North America", "415-555-0132 or 415.555.0132", "[phone] or [phone]"},
	{"phone trunk prefix", "020 7946 0958 / 06 12 34 56 78 / 030/12345678", "[phone] / [phone] / [phone]"},
	{"phone India", "98765 43210", "[phone]"},
	{"phone Singapore", "9123 4567", "[phone]"},
	{"phone Brazil", "11 98765-4321", "[phone]"},
	{"no phone: time zone", "at 10:00+05:30", "at 10:00+05:30"},
	{"no phone: too short", "+1234567", "+1234567"},
	{"no phone: too long", "+1234567890123456", "+1234567890123456"},
	{"no phone: country code 0", "+0 20 7946 0958", "+0 20 7946 0958"},
	{"no phone: NANP exchange 1xx", "555-123-4567", "555-123-4567"},
	{"no phone: date and time", "at 2026-12-01 10:20:30 and 01.12.2026 10", "at 2026-12-01 10:20:30 and 01.12.2026 10"},
	{"no phone: digits without separators", "id 12345678 and 0123456789", "id 12345678 and 0123456789"},
	{"no phone: groups that fit no plan", "1234 5678 and 1 2 3 4 5 6 7 8 9", "1234 5678 and 1 2 3 4 5 6 7 8 9"},
	{"no phone: address", "dial 192.168.100.200:9092", "dial 192.168.100.200:9092"},

	{"iban grouped", "pay DE89 3704 0044 0532 0130 00 now", "pay [iban] now"},
	{"iban compact", "DE89370400440532013000", "[iban]"},
	{"iban with letters", "GB29 NWBK 6016 1331 9268 19; FR14 2004 1010 0505 0001 3M02 606", "[iban]; [iban]"},
	{"iban short country", "NO93 8601 1117 947", "[iban]"},
	{"no iban: wrong check digits", "DE88 3704 0044 0532 0130 00", "DE88 3704 0044 0532 0130 00"},
	{"no iban: a digit changed", "DE89370400440532013001", "DE89370400440532013001"},
	{"no iban: lower case", "de89370400440532013000", "de89370400440532013000"},

	{"card grouped", "card 4111 1111 1111 1111 exp 12/27", "card [card] exp 12/27"},
	{"card dashes", "4111-1111-1111-1111", "[card]"},
	{"card compact", "5555555555554444", "[card]"},
	{"card amex", "3782 822463 10005", "[card]"},
	{"no card: Luhn fails", "4111 1111 1111 1112", "4111 1111 1111 1112"},
	{"no card: issuer digit 1", "order 1234567812345670", "order 1234567812345670"},
	{"no card: mixed separators", "4111 1111-1111 1111", "4111 1111-1111 1111"},
	{"no card: in a word", "x4111111111111111", "x4111111111111111"},

	{"cpf", "cpf 529.982.247-25", "cpf [national-id]"},
	{"cpf compact", "52998224725", "[national-id]"},
	{"no cpf: second digit", "529.982.247-24", "529.982.247-24"},
	{"no cpf: first digit", "52998224735", "52998224735"},
	{"no cpf: one digit repeated", "111.111.111-11", "111.111.111-11"},
	{"cnpj", "cnpj 11.222.333/0001-81", "cnpj [national-id]"},
	{"cnpj compact", "11222333000181", "[national-id]"},
	{"no cnpj: check digit", "11.222.333/0001-80", "11.222.333/0001-80"},
	{"aadhaar", "uid 2341 2341 2346", "uid [national-id]"},
	{"aadhaar compact and dashed", "499118665246, 9876-5432-1012", "[national-id], [national-id]"},
	{"no aadhaar: Verhoeff fails", "2341 2341 2345", "2341 2341 2345"},
	{"no aadhaar: first digit 1", "134123412346", "134123412346"},
	{"nric", "nric S1728872E, G4549883U, M1234567K, s1728872e", "nric [national-id], [national-id], [national-id], [national-id]"},
	{"no nric: check letter", "S1728872F S1179607H M1234567N", "S1728872F S1179607H M1234567N"},
	{"dni", "dni 12345678Z, 12345678-Z, 12345678z", "dni [national-id], [national-id], [national-id]"},
	{"no dni: check letter", "12345678A", "12345678A"},
	{"nie", "X1234567L Y-1234567-X Z1234567R", "[national-id] [national-id] [national-id]"},
	{"no nie: check letter", "X1234567M", "X1234567M"},
	{"ssn", "ssn 123-45-6789 and 078 05 1120", "ssn [national-id] and [national-id]"},
	{"no ssn: area 000, 666, 9xx", "000-45-6789 666-45-6789 912-45-6789", "000-45-6789 666-45-6789 912-45-6789"},
	{"no ssn: group or serial zero", "123-00-6789 123-45-0000", "123-00-6789 123-45-0000"},
	{"no ssn: without separators", "123456789", "123456789"},

	{"several", "alice@example.com called +44 20 7946 0958 about 4111 1111 1111 1111",
		"[email] called [phone] about [card]"},
	{"adjacent groups", "020 7946 0958 4111 1111 1111 1111", "[phone] [card]"},
	{"placeholders stay", "[email] [phone] [iban] [national-id] [card]", "[email] [phone] [iban] [national-id] [card]"},
	{"empty", "", ""},
}

func TestMask(t *testing.T) {
	for _, tc := range detectorCases {
		t.Run(tc.name, func(t *testing.T) {
			got := Mask(tc.in)
			if got != tc.want {
				t.Errorf("Mask(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if c := Contains(tc.in); c != (tc.want != tc.in) {
				t.Errorf("Contains(%q) = %v", tc.in, c)
			}
			if Mask(got) != got || Contains(got) {
				t.Errorf("Mask(%q) = %q is not stable", tc.in, got)
			}
		})
	}
}

// letheText is what Lethe itself writes into logs, errors and reports: none of it is PII.
const letheText = `request er_6ebc4c5fc7aee916243a000c4fb91673 accepted in 5.779ms (due 2026-12-30T05:44:37Z)
subject_hash=3f9a0c1e5b7d2f4a6c8e0b1d3f5a7c9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a key_id k1
store qdrant: retry attempt 3 after 250ms: partition 3 offset 12345 lag 1764547200000
consumer: fetch from 127.0.0.1:9092 failed; redis [::1]:6379; bucket s3://lethe-datasets/acme/eval/qa.csv
event 550e8400-e29b-41d4-a716-446655440000 version 7 written 2026-12-01T10:20:30.123456789+01:00
inventory 2026-11-30.1 built with go1.26.8, franz-go v1.22.3, elapsed 1h2m3.5s, took 18 ms
receipt hash 0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0 seq 42 deleted 47 remaining 0
dlq reason: lethe.dlq.error=decode: schema fingerprint 0x8f3a5c7e91b2d4f6 unknown at offset 9007199254740993
snowflake 1764547200123456789 at 2026-12-01 10:20:30 UTC, etag "9b2cf535f27731c974343645a3985328"`

func TestLetheTextSurvives(t *testing.T) {
	if got := Mask(letheText); got != letheText {
		t.Errorf("Mask changed Lethe's own text:\n%s", diffLines(letheText, got))
	}
	if Contains(letheText) {
		t.Error("Contains found an item in Lethe's own text")
	}
}

func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			out = append(out, "- "+al[i], "+ "+bl[i])
		}
	}
	return strings.Join(out, "\n")
}

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		check func([]byte) bool
		in    string
		want  bool
	}{
		{"luhn", luhn, "79927398713", true},
		{"luhn", luhn, "79927398710", false},
		{"verhoeff", verhoeff, "2363", true},
		{"verhoeff", verhoeff, "2364", false},
		{"verhoeff", verhoeff, "499118665246", true},
		{"cpf", cpf, "52998224725", true},
		{"cpf", cpf, "52998224752", false},
		{"cnpj", cnpj, "11222333000181", true},
		{"cnpj", cnpj, "11222333000118", false},
		{"mod97", mod97, "GB29NWBK60161331926819", true},
		{"mod97", mod97, "GB29NWBK60161331926818", false},
		{"mod97", mod97, "MT84MALT011000012345MTLCAST001S", true},
	} {
		if got := tc.check([]byte(tc.in)); got != tc.want {
			t.Errorf("%s(%s) = %v, want %v", tc.name, tc.in, got, tc.want)
		}
	}
	for in, want := range map[string]byte{"S1728872": 'E', "T0000001": 'E', "F1234567": 'N', "G4549883": 'U', "M1234567": 'K'} {
		if got := nricLetter(in[0], in[1:]); got != want {
			t.Errorf("nricLetter(%s) = %c, want %c", in, got, want)
		}
	}
}

// A long run of digit groups, emails and near-emails is masked in linear time.
func BenchmarkMask(b *testing.B) {
	s := strings.Repeat(letheText+" alice@example.com +44 20 7946 0958 4111 1111 1111 1111 ", 20) +
		strings.Repeat("0958 ", 2000) + strings.Repeat("a.", 2000) + "@" + strings.Repeat("a-", 2000)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		Mask(s)
	}
}
