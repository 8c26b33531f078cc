package plugin

import (
	"context"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
)

// IPAM runs an IPAM plugin with the plugin's own stdin, as the CNI spec's delegation says.
type IPAM interface {
	Add(ctx context.Context, plugin string, stdin []byte) (types.Result, error)
	Del(ctx context.Context, plugin string, stdin []byte) error
	Check(ctx context.Context, plugin string, stdin []byte) error
	GC(ctx context.Context, plugin string, stdin []byte) error
	Status(ctx context.Context, plugin string, stdin []byte) error
}

// execIPAM finds the IPAM binary in CNI_PATH and execs it.
type execIPAM struct{}

func (execIPAM) Add(ctx context.Context, plugin string, stdin []byte) (types.Result, error) {
	return invoke.DelegateAdd(ctx, plugin, stdin, nil)
}

func (execIPAM) Del(ctx context.Context, plugin string, stdin []byte) error {
	return invoke.DelegateDel(ctx, plugin, stdin, nil)
}

func (execIPAM) Check(ctx context.Context, plugin string, stdin []byte) error {
	return invoke.DelegateCheck(ctx, plugin, stdin, nil)
}

func (execIPAM) GC(ctx context.Context, plugin string, stdin []byte) error {
	return invoke.DelegateGC(ctx, plugin, stdin, nil)
}

func (execIPAM) Status(ctx context.Context, plugin string, stdin []byte) error {
	return invoke.DelegateStatus(ctx, plugin, stdin, nil)
}
