package podcontract

import (
	"strings"
	"testing"
)

// A token is what the injector makes, or refused: the pod's creator can write anything into the
// variable, and readers put it in a request header.
func TestValidStatusToken(t *testing.T) {
	for _, ok := range []string{strings.Repeat("0123456789abcdef", 4), strings.Repeat("aZ-_", 8), strings.Repeat("f", MaxStatusTokenLen)} {
		if !ValidStatusToken(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "short", strings.Repeat("a", MinStatusTokenLen-1), strings.Repeat("a", MaxStatusTokenLen+1),
		strings.Repeat("a", 40) + "\r\nX-Other: 1", strings.Repeat("a", 40) + " ", strings.Repeat("é", 20), strings.Repeat("a", 40) + "="} {
		if ValidStatusToken(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestStatusTokenMatches(t *testing.T) {
	tok := strings.Repeat("0123456789abcdef", 4)
	if !StatusTokenMatches(tok, tok) {
		t.Error("the token does not match itself")
	}
	for _, got := range []string{"", tok[:len(tok)-1], tok + "0", strings.ToUpper(tok), strings.Repeat("0", len(tok))} {
		if StatusTokenMatches(tok, got) {
			t.Errorf("%q matches %q", got, tok)
		}
	}
	// A pod without a token (or with an invalid one) is matched by nothing, the empty header
	// included.
	if StatusTokenMatches("", "") || StatusTokenMatches("short", "short") {
		t.Error("an invalid token matched")
	}
}
