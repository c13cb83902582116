package pii

// Bounds of a number: the groups (chunks) read together and their length in bytes.
const (
	maxChunks    = 8
	maxNumberLen = 40
)

// chunkEnd returns the end of the digit group starting at s[i], looking at most up to
// limit: digits joined by '-', '.' or '/', at most one parenthesised part at a time, and a
// leading '+'. It ends after a digit or a closing parenthesis; it is i when there is none.
func chunkEnd(s string, i, limit int) int {
	j, end, open := i, i, false
	if j < len(s) && s[j] == '+' {
		j++
	}
	for j < len(s) && j < limit {
		switch c := s[j]; {
		case isDigit(c):
			j++
			if !open {
				end = j
			}
		case c == '(' && !open:
			open = true
			j++
		case c == ')' && open:
			open = false
			j++
			end = j
		case c == '-' || c == '.' || c == '/':
			j++
		default:
			return end
		}
	}
	return end
}

func startsChunk(c byte) bool { return isDigit(c) || c == '+' || c == '(' }

// matchNumber returns the longest run of groups, starting with the one at s[i] and
// separated by single spaces, that is a card, a national id or a phone number.
func matchNumber(s string, i int) (kind, int) {
	var ends [maxChunks]int
	n := 0
	for j := i; n < maxChunks; {
		e := chunkEnd(s, j, i+maxNumberLen+1)
		if e == j || e-i > maxNumberLen {
			break
		}
		ends[n] = e
		n++
		if e+1 >= len(s) || s[e] != ' ' || !startsChunk(s[e+1]) {
			break
		}
		j = e + 1
	}
	for k := n - 1; k >= 0; k-- {
		if !rightOK(s, ends[k]) {
			continue
		}
		if kd := classify(s[i:ends[k]]); kd != none {
			return kd, ends[k]
		}
	}
	return none, 0
}

// classify says what the number t is. Its shape is t with each digit replaced by 'd'.
func classify(t string) kind {
	var db, sb [maxNumberLen]byte
	nd := 0
	for i := 0; i < len(t); i++ {
		if isDigit(t[i]) {
			db[nd] = t[i]
			nd++
			sb[i] = 'd'
		} else {
			sb[i] = t[i]
		}
	}
	d, sh := db[:nd], sb[:len(t)]
	if nd < 8 {
		return none // nothing found here has fewer digits
	}
	if sh[0] == '+' {
		if len(sh) > 1 && sh[1] == 'd' && d[0] != '0' && nd >= 8 && nd <= 15 && phoneLayout(sh[1:]) {
			return phone
		}
		return none
	}
	switch {
	case isCard(sh, d):
		return card
	case isCPF(sh, d), isCNPJ(sh, d), isAadhaar(sh, d), isSSN(sh, d):
		return nationalID
	case isPhone(sh, d):
		return phone
	}
	return none
}

// groups splits a shape into digit group lengths and the single separators between them
// (one of seps); ok is false for any other layout.
func groups(sh []byte, seps string) (lens []int, between []byte, ok bool) {
	n := 0
	for i, c := range sh {
		switch {
		case c == 'd':
			n++
		case n > 0 && i+1 < len(sh) && sh[i+1] == 'd' && indexByte(seps, c):
			lens, between, n = append(lens, n), append(between, c), 0
		default:
			return nil, nil, false
		}
	}
	if n == 0 {
		return nil, nil, false
	}
	return append(lens, n), between, true
}

func indexByte(s string, c byte) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return true
		}
	}
	return false
}

func same(b []byte) bool {
	for _, c := range b {
		if c != b[0] {
			return false
		}
	}
	return true
}

func oneOf(sh []byte, shapes ...string) bool {
	for _, s := range shapes {
		if string(sh) == s {
			return true
		}
	}
	return false
}

// isCard: 13 to 19 digits starting with 2 to 6, compact or in groups of four (the last
// one shorter) or 4-6-5 / 4-6-4 with one kind of separator, and the Luhn check.
func isCard(sh, d []byte) bool {
	if len(d) < 13 || len(d) > 19 || d[0] < '2' || d[0] > '6' {
		return false
	}
	lens, between, ok := groups(sh, " -")
	if !ok || !same(between) {
		return false
	}
	switch {
	case len(lens) == 1:
	case len(lens) == 3 && lens[0] == 4 && lens[1] == 6 && (lens[2] == 5 || lens[2] == 4):
	default:
		for k, l := range lens {
			if l != 4 && (k < len(lens)-1 || l > 4) {
				return false
			}
		}
	}
	return luhn(d)
}

func isCPF(sh, d []byte) bool {
	return oneOf(sh, "ddd.ddd.ddd-dd", "ddddddddddd") && cpf(d)
}

func isCNPJ(sh, d []byte) bool {
	return oneOf(sh, "dd.ddd.ddd/dddd-dd", "dddddddddddddd") && cnpj(d)
}

func isAadhaar(sh, d []byte) bool {
	return oneOf(sh, "dddddddddddd", "dddd dddd dddd", "dddd-dddd-dddd") && d[0] >= '2' && verhoeff(d)
}

// isSSN: ddd-dd-dddd or ddd dd dddd with area 001-665, 667-899, group and serial not zero.
func isSSN(sh, d []byte) bool {
	if !oneOf(sh, "ddd-dd-dddd", "ddd dd dddd") {
		return false
	}
	area := string(d[:3])
	return area != "000" && area != "666" && area[0] != '9' && string(d[3:5]) != "00" && string(d[5:]) != "0000"
}

// isPhone recognises national numbers written with separators, and international ones
// written with 00 instead of +.
func isPhone(sh, d []byte) bool {
	nd := len(d)
	if d[0] == '0' && d[1] == '0' {
		return sh[0] == 'd' && d[2] != '0' && nd-2 >= 8 && nd-2 <= 15 && phoneLayout(sh)
	}
	if sh[0] == '(' {
		// An area code in parentheses: (11) 98765-4321, (020) 7946 0958, (555) 123-4567.
		i := 1
		for i < len(sh) && sh[i] == 'd' {
			i++
		}
		if i < 3 || i > 5 || i == len(sh) || sh[i] != ')' {
			return false
		}
		rest := sh[i+1:]
		if len(rest) > 0 && rest[0] == ' ' {
			rest = rest[1:]
		}
		lens, _, ok := groups(rest, " -.")
		return ok && minLen(lens) >= 2 && nd >= 10 && nd <= 12
	}
	nanp := func(c byte) bool { return c >= '2' && c <= '9' }
	switch {
	case oneOf(sh, "ddd-ddd-dddd", "ddd.ddd.dddd", "ddd ddd dddd") && nanp(d[0]) && nanp(d[3]): // North America
		return true
	case oneOf(sh, "d-ddd-ddd-dddd", "d.ddd.ddd.dddd", "d ddd ddd dddd") && d[0] == '1' && nanp(d[1]) && nanp(d[4]):
		return true
	case oneOf(sh, "ddddd ddddd", "ddddd-ddddd") && d[0] >= '6': // Indian mobiles
		return true
	case oneOf(sh, "dddd dddd", "dddd-dddd") && indexByte("689", d[0]): // Singapore
		return true
	case oneOf(sh, "dd ddddd-dddd", "dd dddd-dddd", "dd ddddd dddd") && d[0] != '0' && d[1] != '0': // Brazil
		return true
	}
	// A trunk prefix: 020 7946 0958, 06 12 34 56 78, 030/12345678, 0176-1234567.
	lens, seps, ok := groups(sh, " -./")
	return ok && d[0] == '0' && len(lens) >= 2 && minLen(lens) >= 2 && nd >= 9 && nd <= 12 && !dateLike(lens, seps)
}

// phoneLayout reports whether sh is digit groups separated by single ' ', '-' or '.', with
// at most one group of 1 to 4 digits in parentheses ("44 (0)20 7946 0958"), ending in a
// digit.
func phoneLayout(sh []byte) bool {
	parens := 0
	for i := 0; i < len(sh); {
		switch {
		case sh[i] == '(':
			j := i + 1
			for j < len(sh) && sh[j] == 'd' {
				j++
			}
			if parens > 0 || j == i+1 || j-i-1 > 4 || j >= len(sh) || sh[j] != ')' {
				return false
			}
			parens++
			i = j + 1
			if i < len(sh) && sh[i] == 'd' {
				continue
			}
		case sh[i] == 'd':
			for i < len(sh) && sh[i] == 'd' {
				i++
			}
		default:
			return false
		}
		if i == len(sh) {
			return sh[i-1] == 'd'
		}
		switch sh[i] {
		case ' ', '-', '.':
			i++
			if i == len(sh) {
				return false
			}
		case '(':
		default:
			return false
		}
	}
	return false
}

// dateLike reports whether three groups in a row read as a date: 4-2-2 or 2-2-4 digits
// with one kind of separator among '-', '.' and '/'.
func dateLike(lens []int, seps []byte) bool {
	for k := 0; k+2 < len(lens); k++ {
		if seps[k] != seps[k+1] || seps[k] == ' ' {
			continue
		}
		if lens[k] == 4 && lens[k+1] == 2 && lens[k+2] == 2 || lens[k] == 2 && lens[k+1] == 2 && lens[k+2] == 4 {
			return true
		}
	}
	return false
}

func minLen(lens []int) int {
	m := lens[0]
	for _, l := range lens {
		m = min(m, l)
	}
	return m
}
