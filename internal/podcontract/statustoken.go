package podcontract

import "crypto/subtle"

// Every pod can reach SupervisorPort, but StatusPath and ConfigPath say what a pod runs (its
// addresses, its tuning, why it failed): the supervisor answers them only to the node and to a
// request carrying the pod's status token, a random value the injector writes into the
// dataplane container's environment. Whoever may read the pod (the operator, a user of
// `kubectl fstack` with get on pods) can read the token and send it; another namespace's pods
// cannot. It is a header of its own, not Authorization: kube-apiserver's authentication filter
// removes Authorization from a request before its pod proxy passes it on, and keeps the rest.
const (
	// EnvStatusToken holds the token in the dataplane container.
	EnvStatusToken = "FSTACK_STATUS_TOKEN"
	// StatusTokenHeader carries the token in a request for StatusPath or ConfigPath.
	StatusTokenHeader = "X-Kubefstack-Token"
	// StatusTokenBytes is the random bytes of a token the injector makes (256 bits, as 64 hex
	// digits).
	StatusTokenBytes = 32
	// MinStatusTokenLen and MaxStatusTokenLen bound a token anyone accepts: at least 128 bits
	// as hex, and a header's worth at most. The pod's creator can write any value there, so
	// readers check it (ValidStatusToken) before sending it, and the supervisor before taking it.
	MinStatusTokenLen = 32
	MaxStatusTokenLen = 128
	// StatusTokenRefusal is the supervisor's 403 to anyone else; readers look for it to tell it
	// from the API server's own 403.
	StatusTokenRefusal = "answered to the node and to requests with the pod's status token only (header " +
		StatusTokenHeader + ", the value of the dataplane container's " + EnvStatusToken + ")"
)

// ValidStatusToken says whether s can be a status token: MinStatusTokenLen to MaxStatusTokenLen
// characters of the URL-safe base64 alphabet (hex is a part of it).
func ValidStatusToken(s string) bool {
	if len(s) < MinStatusTokenLen || len(s) > MaxStatusTokenLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenByte(s[i]) {
			return false
		}
	}
	return true
}

func tokenByte(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || c == '_'
}

// StatusTokenMatches compares a request's token with the pod's in constant time (for a given
// length): a caller learns nothing of the token from how long a refusal takes. An invalid want
// matches nothing.
func StatusTokenMatches(want, got string) bool {
	return ValidStatusToken(want) && subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}
