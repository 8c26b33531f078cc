package plugin

import (
	"crypto/sha256"
	"math/rand/v2"
	"testing"
)

// TestSum256MatchesCryptoSHA256 pins the hand-written SHA-256 to the standard library's at every
// padding boundary (55/56/63/64 bytes and multiples) and on random inputs.
func TestSum256MatchesCryptoSHA256(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 300 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		if got, want := sum256(b), sha256.Sum256(b); got != want {
			t.Fatalf("len %d: sum256 %x, crypto/sha256 %x", n, got, want)
		}
	}
}
