package plugin

import (
	"errors"

	"github.com/containernetworking/cni/pkg/types"
)

// cniErr wraps err in the spec's error shape unless it already is one, so the most specific
// code found deep down is what the runtime sees.
func cniErr(code uint, msg string, err error) error {
	var te *types.Error
	if errors.As(err, &te) {
		return te
	}
	details := ""
	if err != nil {
		details = err.Error()
		// The runtime prints msg and details joined: a message that is the error itself is
		// said once.
		if msg == "" {
			msg, details = details, ""
		}
	}
	return types.NewError(code, msg, details)
}
