package plugin

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestOVSErrorsMapToRetryableOrPermanentCodes(t *testing.T) {
	cases := []struct {
		err  error
		code uint
	}{
		{fmt.Errorf("%w: %q", errBridgeMissing, "br0"), types.ErrInvalidNetworkConfig},
		{fmt.Errorf("%w: %q", errBridgeNotNetdev, "br0"), types.ErrInvalidNetworkConfig},
		{fmt.Errorf("%w at /x: refused", errOVSDBUnreachable), types.ErrTryAgainLater},
		{errors.New("constraint violation"), types.ErrInternal},
	}
	for _, tc := range cases {
		err := ovsErr(tc.err)
		if codeOf(err) != tc.code {
			t.Errorf("%v: code %d, want %d", tc.err, codeOf(err), tc.code)
		}
		var te *types.Error
		if !errors.As(err, &te) || !strings.Contains(te.Msg+te.Details, tc.err.Error()) {
			t.Errorf("%#v lost the cause %q", err, tc.err)
		}
	}
}

// The most specific code found deep down wins over the wrapper's.
func TestCniErrKeepsAnInnerCNIError(t *testing.T) {
	inner := types.NewError(types.ErrInvalidEnvironmentVariables, "inner", "")
	var te *types.Error
	got := cniErr(types.ErrInternal, "outer", fmt.Errorf("wrapped: %w", inner))
	if !errors.As(got, &te) || te.Code != types.ErrInvalidEnvironmentVariables || te.Msg != "inner" {
		t.Fatalf("got %v, want the inner error", got)
	}
	got = cniErr(types.ErrIOFailure, "", errors.New("disk full"))
	if !errors.As(got, &te) || te.Code != types.ErrIOFailure || te.Msg != "disk full" {
		t.Fatalf("got %#v", got)
	}
}

// containerd and CRI-O print a plugin error's msg and details joined: an error that is its own
// message is said once in the pod's events.
func TestCniErrSaysTheCauseOnce(t *testing.T) {
	cause := errors.New("annotation kubefstack.io/binding[eth0].sources: 10.99.0.1 is a gateway")
	var te *types.Error
	if !errors.As(cniErr(types.ErrInvalidNetworkConfig, "", cause), &te) {
		t.Fatal("not a CNI error")
	}
	if n := strings.Count(te.Error(), cause.Error()); n != 1 {
		t.Fatalf("%q says the cause %d times", te.Error(), n)
	}
}
