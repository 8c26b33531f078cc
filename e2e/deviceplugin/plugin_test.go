package deviceplugin

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// registry plays the kubelet's Registration service on a socket in a temporary directory (the
// e2e suite registers with the real kubelet).
type registry struct {
	pluginapi.UnimplementedRegistrationServer
	got chan *pluginapi.RegisterRequest
}

func (r *registry) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	r.got <- req
	return &pluginapi.Empty{}, nil
}

func startRegistry(t *testing.T, dir string) *registry {
	t.Helper()
	lis, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	r := &registry{got: make(chan *pluginapi.RegisterRequest, 1)}
	s := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(s, r)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return r
}

func TestEnvName(t *testing.T) {
	for res, want := range map[string]string{
		"intel.com/sriov_dpdk":      "PCIDEVICE_INTEL_COM_SRIOV_DPDK",
		"kubefstack.io/e2e_fake_vf": "PCIDEVICE_KUBEFSTACK_IO_E2E_FAKE_VF",
		"a.b.example/VF_1":          "PCIDEVICE_A_B_EXAMPLE_VF_1",
	} {
		if got := EnvName(res); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", res, got, want)
		}
	}
}

func TestRegisterListAllocateStop(t *testing.T) {
	dir, err := os.MkdirTemp("", "dp") // short: a unix socket path has 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	reg := startRegistry(t, dir)
	p := New("kubefstack.io/e2e_fake_vf", "0000:00:1f.2", "0000:00:1f.3")
	p.Dir = dir
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	req := <-reg.got
	if req.ResourceName != p.Resource || req.Endpoint != p.Endpoint || req.Version != pluginapi.Version {
		t.Fatalf("registered %+v", req)
	}

	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, p.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	c := pluginapi.NewDevicePluginClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range list.Devices {
		if d.Health != pluginapi.Healthy {
			t.Fatalf("device %s is %s", d.ID, d.Health)
		}
		ids = append(ids, d.ID)
	}
	if !slices.Equal(ids, p.Addresses) {
		t.Fatalf("listed %v, want %v", ids, p.Addresses)
	}

	resp, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"0000:00:1f.3", "0000:00:1f.2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	env := resp.ContainerResponses[0].Envs
	if len(env) != 1 || env["PCIDEVICE_KUBEFSTACK_IO_E2E_FAKE_VF"] != "0000:00:1f.3,0000:00:1f.2" {
		t.Fatalf("Allocate env %v", env)
	}
	if got := p.Allocations(); len(got) != 1 || len(got[0]) != 2 {
		t.Fatalf("Allocations() = %v", got)
	}
	if _, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"0000:00:1f.7"}}}}); err == nil {
		t.Fatal("Allocate of a device the plugin never listed succeeded")
	}

	p.Stop()
	if _, err := stream.Recv(); err == nil {
		t.Fatal("ListAndWatch stream still open after Stop")
	}
	if _, err := os.Stat(filepath.Join(dir, p.Endpoint)); !os.IsNotExist(err) {
		t.Fatalf("socket left after Stop: %v", err)
	}
}

func TestStartWithoutKubeletFails(t *testing.T) {
	dir, err := os.MkdirTemp("", "dp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := New("kubefstack.io/e2e_fake_vf", "0000:00:1f.2")
	p.Dir = dir
	if err := p.Start(context.Background()); err == nil {
		p.Stop()
		t.Fatal("Start registered with no kubelet socket")
	}
	if _, err := os.Stat(filepath.Join(dir, p.Endpoint)); !os.IsNotExist(err) {
		t.Fatalf("socket left after a failed Start: %v", err)
	}
}
