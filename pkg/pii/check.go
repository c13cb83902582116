package pii

// luhn reports whether the digits d pass the Luhn check.
func luhn(d []byte) bool {
	sum := 0
	for k := range d {
		v := int(d[len(d)-1-k] - '0')
		if k%2 == 1 {
			if v *= 2; v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	return sum%10 == 0
}

// Verhoeff's tables: the dihedral group D5 and the position permutation.
var (
	verhoeffD = [10][10]byte{
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 3, 4, 0, 6, 7, 8, 9, 5},
		{2, 3, 4, 0, 1, 7, 8, 9, 5, 6}, {3, 4, 0, 1, 2, 8, 9, 5, 6, 7},
		{4, 0, 1, 2, 3, 9, 5, 6, 7, 8}, {5, 9, 8, 7, 6, 0, 4, 3, 2, 1},
		{6, 5, 9, 8, 7, 1, 0, 4, 3, 2}, {7, 6, 5, 9, 8, 2, 1, 0, 4, 3},
		{8, 7, 6, 5, 9, 3, 2, 1, 0, 4}, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0},
	}
	verhoeffP = func() (p [8][10]byte) {
		p[0] = [10]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
		p[1] = [10]byte{1, 5, 7, 6, 2, 8, 3, 0, 9, 4}
		for i := 2; i < 8; i++ {
			for j := range 10 {
				p[i][j] = p[i-1][p[1][j]]
			}
		}
		return p
	}()
)

// verhoeff reports whether the digits d, check digit last, pass the Verhoeff check.
func verhoeff(d []byte) bool {
	c := byte(0)
	for k := range d {
		c = verhoeffD[c][verhoeffP[k%8][d[len(d)-1-k]-'0']]
	}
	return c == 0
}

// mod11 is the check digit of d under weights w (Brazil's CPF and CNPJ).
func mod11(d []byte, w []int) byte {
	sum := 0
	for k, x := range w {
		sum += int(d[k]-'0') * x
	}
	if r := sum % 11; r >= 2 {
		return byte('0' + 11 - r)
	}
	return '0'
}

// cpf checks the 11 digits of a CPF: both mod-11 check digits, and not one digit repeated.
func cpf(d []byte) bool {
	return !same(d) &&
		mod11(d, []int{10, 9, 8, 7, 6, 5, 4, 3, 2}) == d[9] &&
		mod11(d, []int{11, 10, 9, 8, 7, 6, 5, 4, 3, 2}) == d[10]
}

// cnpj checks the 14 digits of a CNPJ: both mod-11 check digits, and not one digit repeated.
func cnpj(d []byte) bool {
	return !same(d) &&
		mod11(d, []int{5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}) == d[12] &&
		mod11(d, []int{6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}) == d[13]
}

// ibanLen is the length of an IBAN per country (SWIFT IBAN registry).
var ibanLen = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
	"BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
	"DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
	"GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28,
	"IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28,
	"LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22,
	"MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23,
	"PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
	"SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}

func isIBANChar(c byte) bool { return isDigit(c) || isUpper(c) }

// matchIBAN returns the end of what is written like an IBAN at s[i], or 0: a country
// code, two check digits and the country's length in capitals and digits, compact or in
// groups of four separated by single spaces; valid says whether its mod-97 check holds.
func matchIBAN(s string, i int) (end int, valid bool) {
	if i+4 > len(s) || !isUpper(s[i]) || !isUpper(s[i+1]) || !isDigit(s[i+2]) || !isDigit(s[i+3]) {
		return 0, false
	}
	want := ibanLen[s[i:i+2]]
	if want == 0 {
		return 0, false
	}
	var buf [34]byte
	n, j := 0, i
	for j < len(s) && n <= want && isIBANChar(s[j]) {
		if n < want {
			buf[n] = s[j]
		}
		n++
		j++
	}
	if n != want && n != 4 {
		return 0, false
	}
	for n < want { // groups of four; the last may be shorter
		if j+1 >= len(s) || s[j] != ' ' || !isIBANChar(s[j+1]) {
			return 0, false
		}
		j++
		g := 0
		for j < len(s) && g <= 4 && isIBANChar(s[j]) {
			if n+g < want {
				buf[n+g] = s[j]
			}
			g++
			j++
		}
		if g > 4 || n+g > want || g < 4 && n+g != want {
			return 0, false
		}
		n += g
	}
	if !rightOK(s, j) {
		return 0, false
	}
	return j, mod97(buf[:n])
}

// mod97 reports whether the IBAN b passes ISO 7064 MOD 97-10: its first four characters
// moved to the end and letters read as 10 to 35, it is 1 modulo 97.
func mod97(b []byte) bool {
	rem := 0
	for k := range b {
		c := b[(k+4)%len(b)]
		if isDigit(c) {
			rem = (rem*10 + int(c-'0')) % 97
		} else {
			rem = (rem*100 + int(c-'A') + 10) % 97
		}
	}
	return rem == 1
}

const dniLetters = "TRWAGMYFPDXBNJZSQVHLCKE"

func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

// digitsAt returns the value of the n digits at s[j], or -1.
func digitsAt(s string, j, n int) int {
	if j+n > len(s) {
		return -1
	}
	v := 0
	for k := j; k < j+n; k++ {
		if !isDigit(s[k]) {
			return -1
		}
		v = v*10 + int(s[k]-'0')
	}
	return v
}

// matchLetterID returns the end of the id with a check letter that starts at s[i], or 0:
// a Spanish DNI (8 digits, a letter) or NIE (X, Y or Z, 7 digits, a letter), each with an
// optional '-' before the letter (and after the NIE's first letter), or a Singapore
// NRIC/FIN (S, T, F, G or M, 7 digits, a letter). Letters may be lower case.
func matchLetterID(s string, i int) int {
	j, letter := 0, byte(0)
	switch c := upper(s[i]); {
	case isDigit(c): // DNI
		n := digitsAt(s, i, 8)
		if n < 0 {
			return 0
		}
		j, letter = i+8, dniLetters[n%23]
	case c == 'X' || c == 'Y' || c == 'Z': // NIE
		j = i + 1
		if j < len(s) && s[j] == '-' {
			j++
		}
		n := digitsAt(s, j, 7)
		if n < 0 {
			return 0
		}
		j, letter = j+7, dniLetters[(int(c-'X')*10_000_000+n)%23]
	case c == 'S' || c == 'T' || c == 'F' || c == 'G' || c == 'M': // NRIC/FIN
		if digitsAt(s, i+1, 7) < 0 {
			return 0
		}
		j, letter = i+8, nricLetter(c, s[i+1:i+8])
		if j >= len(s) || upper(s[j]) != letter || !rightOK(s, j+1) {
			return 0
		}
		return j + 1
	default:
		return 0
	}
	if j < len(s) && s[j] == '-' {
		j++
	}
	if j >= len(s) || upper(s[j]) != letter || !rightOK(s, j+1) {
		return 0
	}
	return j + 1
}

// nricLetter is the check letter of a Singapore NRIC/FIN of the series and 7 digits.
func nricLetter(series byte, digits string) byte {
	sum := 0
	for k, w := range [7]int{2, 7, 6, 5, 4, 3, 2} {
		sum += int(digits[k]-'0') * w
	}
	switch series {
	case 'S':
		return "JZIHGFEDCBA"[sum%11]
	case 'T':
		return "JZIHGFEDCBA"[(sum+4)%11]
	case 'F':
		return "XWUTRQPNMLK"[sum%11]
	case 'G':
		return "XWUTRQPNMLK"[(sum+4)%11]
	}
	return "KLJNPQRTUWX"[10-(sum+3)%11] // M
}
