package redact

import "strings"

// byteRank orders bytes from the most to the least common in trajectory
// text (English prose, code, JSON); a byte not listed is rarer than all
// that are. Literals are searched by their rarest byte (indexAt), which
// stops strings.IndexByte far less often than their first byte would.
const byteRank = " \netaoinsrhldcu\"mfp.gw,y:b/_-v=()k{}0\t12x;'[]<>3456789*#jq&zSTACIEPRDNMLOBFGHUWKYVJXZQ"

var rank = func() (r [256]int) {
	for i := range r {
		r[i] = len(byteRank)
	}
	for i := 0; i < len(byteRank); i++ {
		r[byteRank[i]] = i
	}
	return r
}()

// rarest returns the index in lit of its rarest byte.
func rarest(lit string) int {
	k := 0
	for i := 1; i < len(lit); i++ {
		if rank[lit[i]] > rank[lit[k]] {
			k = i
		}
	}
	return k
}

// indexAt is strings.Index(s, lit), searching for lit's byte at k.
func indexAt(s, lit string, k int) int {
	c := lit[k]
	for pos := 0; ; {
		i := strings.IndexByte(s[pos:], c)
		if i < 0 {
			return -1
		}
		start := pos + i - k
		if start >= 0 && start+len(lit) <= len(s) && s[start:start+len(lit)] == lit {
			return start
		}
		pos += i + 1
	}
}

// literal is one literal of a detector, with its search byte.
type literal struct {
	det int // index in detectors
	lit string
	k   int
}

// anchors groups the detectors' literals by search byte, so that one
// IndexByte pass per distinct byte finds the candidates of all of them.
var anchors = func() map[byte][]literal {
	m := map[byte][]literal{}
	for d, det := range detectors {
		for _, lit := range det.lits {
			k := rarest(lit)
			m[lit[k]] = append(m[lit[k]], literal{det: d, lit: lit, k: k})
		}
	}
	return m
}()

// candidate is an occurrence of a detector's literal.
type candidate struct {
	at  int
	lit string
}

func byPosition(a, b candidate) int { return a.at - b.at }
