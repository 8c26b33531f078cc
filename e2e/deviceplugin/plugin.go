// Package deviceplugin is a test device plugin for the kubelet's device-plugin API (v1beta1):
// it advertises PCI addresses that exist nowhere as devices of one extended resource and, on
// Allocate, sets the one environment variable the SR-IOV network device plugin sets,
// PCIDEVICE_<RESOURCE>=<address>[,<address>...]. It hands out no device node and no VF: it
// stands in for the SR-IOV device plugin, which cannot run where there is no SR-IOV NIC, so that
// everything between it and the dataplane (the injector's resource request, the scheduler, the
// kubelet's device manager and its environment, the supervisor's reading of it) is real.
//
// The e2e suite runs it inside its own process on the node (a host process, like the SR-IOV
// device plugin's DaemonSet with hostPath device-plugins): Start registers it with the kubelet,
// Stop ends it and removes its socket. It does not re-register after a kubelet restart (the
// kubelet then removes every plugin socket); the suite never restarts the kubelet.
package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Plugin serves one resource.
type Plugin struct {
	// Resource is the extended resource name, <domain>/<name>.
	Resource string
	// Addresses are the PCI addresses advertised; each is its own device ID, as with the SR-IOV
	// device plugin.
	Addresses []string
	// Dir is the kubelet's device-plugin directory (kubelet.sock is in it).
	Dir string
	// Endpoint is the plugin's socket file name in Dir.
	Endpoint string

	pluginapi.UnimplementedDevicePluginServer
	server *grpc.Server
	stop   chan struct{}
	mu     sync.Mutex
	allocs [][]string
}

// New makes a plugin of resource over addresses in the kubelet's default directory.
func New(resource string, addresses ...string) *Plugin {
	return &Plugin{Resource: resource, Addresses: addresses, Dir: pluginapi.DevicePluginPath,
		Endpoint: "kubefstack-" + strings.NewReplacer("/", "-", ".", "-").Replace(resource) + ".sock"}
}

// EnvName is the variable the SR-IOV network device plugin sets for a resource: PCIDEVICE_, the
// resource's domain with '.' as '_', '_', the name, upper-cased. Written from that plugin's
// behaviour, not from kube-fstack's renderer, so the suite checks one against the other.
func EnvName(resource string) string {
	domain, name, _ := strings.Cut(resource, "/")
	return strings.ToUpper("PCIDEVICE_" + strings.ReplaceAll(domain, ".", "_") + "_" + name)
}

// Start serves the plugin's socket and registers the resource with the kubelet.
func (p *Plugin) Start(ctx context.Context) error {
	if strings.Count(p.Resource, "/") != 1 || len(p.Addresses) == 0 {
		return fmt.Errorf("device plugin: resource %q must be <domain>/<name> with at least one address", p.Resource)
	}
	sock := filepath.Join(p.Dir, p.Endpoint)
	// A socket left by an earlier run that died: the kubelet would dial a dead endpoint.
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("device plugin: %w", err)
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("device plugin: %w", err)
	}
	p.stop = make(chan struct{})
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, p)
	go func() { _ = p.server.Serve(lis) }()
	if err := p.register(ctx); err != nil {
		p.Stop()
		return err
	}
	return nil
}

func (p *Plugin) register(ctx context.Context) error {
	kubelet := filepath.Join(p.Dir, filepath.Base(pluginapi.KubeletSocket))
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("device plugin: kubelet at %s: %w", kubelet, err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: p.Endpoint, ResourceName: p.Resource,
		Options: &pluginapi.DevicePluginOptions{},
	})
	if err != nil {
		return fmt.Errorf("device plugin: register %s with the kubelet at %s: %w", p.Resource, kubelet, err)
	}
	return nil
}

// Stop ends the plugin's streams and server and removes its socket; the kubelet then marks the
// devices unhealthy. Safe to call twice.
func (p *Plugin) Stop() {
	if p.server == nil {
		return
	}
	close(p.stop)
	p.server.Stop()
	p.server = nil
	_ = os.Remove(filepath.Join(p.Dir, p.Endpoint))
}

// Allocations are the device IDs of every container Allocate served, in call order.
func (p *Plugin) Allocations() [][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.allocs)
}

// GetDevicePluginOptions: no PreStartContainer, no preferred allocation.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{}, nil
}

// ListAndWatch sends every address as a healthy device once, then holds the stream open until
// the plugin stops (a closed stream tells the kubelet the devices are gone).
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	devs := make([]*pluginapi.Device, len(p.Addresses))
	for i, a := range p.Addresses {
		devs[i] = &pluginapi.Device{ID: a, Health: pluginapi.Healthy}
	}
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
		return err
	}
	select {
	case <-p.stop:
	case <-stream.Context().Done():
	}
	return nil
}

// Allocate answers each container's request with PCIDEVICE_<RESOURCE> listing its devices'
// addresses, comma-separated, in the order the kubelet asked for them.
func (p *Plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for _, c := range req.ContainerRequests {
		for _, id := range c.DevicesIds {
			if !slices.Contains(p.Addresses, id) {
				return nil, fmt.Errorf("device %q is not one of %s's", id, p.Resource)
			}
		}
		p.mu.Lock()
		p.allocs = append(p.allocs, slices.Clone(c.DevicesIds))
		p.mu.Unlock()
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{EnvName(p.Resource): strings.Join(c.DevicesIds, ",")},
		})
	}
	return resp, nil
}

// PreStartContainer is never called (the options do not ask for it).
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
