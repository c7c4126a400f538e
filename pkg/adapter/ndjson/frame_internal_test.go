package ndjson

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestSpecial holds the word-at-a-time test to the byte-at-a-time one, on
// random words and on words made of the bytes around each boundary.
func TestSpecial(t *testing.T) {
	slow := func(b []byte) bool {
		for _, c := range b {
			if c == '"' || c == '\\' || c < 0x20 {
				return true
			}
		}
		return false
	}
	edges := []byte{0x00, 0x1f, 0x20, 0x21, '"' - 1, '"', '"' + 1, '\\' - 1, '\\', '\\' + 1, 0x7f, 0x80, 0xa2, 0xdc, 0xff}
	r := rand.New(rand.NewPCG(5, 6))
	var b [8]byte
	for n := range 1_000_000 {
		for i := range b {
			if n%2 == 0 {
				b[i] = byte(r.Uint32())
			} else {
				b[i] = edges[r.IntN(len(edges))]
			}
		}
		if got, want := special(binary.LittleEndian.Uint64(b[:])), slow(b[:]); got != want {
			t.Fatalf("special(% x) = %t, want %t", b, got, want)
		}
	}
}
