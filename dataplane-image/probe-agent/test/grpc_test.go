package agenttest

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// grpcHealthServer is grpc-go's own health service on a loopback port, over HTTP/2 without TLS,
// as an app's gRPC server answers the kubelet.
func grpcHealthServer(t *testing.T) (int, *health.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().(*net.TCPAddr).Port, hs
}

func grpcReq(port int, service string) string {
	return fmt.Sprintf("grpc 127.0.0.1 %d 2000 %d\n%s", port, len(service), service)
}

func TestAgentGRPCHealthCheck(t *testing.T) {
	a := startAgent(t, build(t, t.TempDir(), "agent", agentSources...))
	port, hs := grpcHealthServer(t)
	long := strings.Repeat("s", 150) // a length that takes two varint bytes
	hs.SetServingStatus("web", healthpb.HealthCheckResponse_NOT_SERVING)
	hs.SetServingStatus(long, healthpb.HealthCheckResponse_SERVING)
	http1, closed := statusServer(t, 200), freePort(t)
	for _, c := range []struct{ req, want string }{
		{grpcReq(port, ""), "ok SERVING"}, // the server's overall health
		{grpcReq(port, long), "ok SERVING"},
		{grpcReq(port, "web"), "fail health status NOT_SERVING"},
		{grpcReq(port, "nobody"), "fail the call ended without a health status"}, // NOT_FOUND
		{grpcReq(http1, ""), "fail "},                                            // not a gRPC server
		{grpcReq(closed, ""), "fail connect: Connection refused"},
	} {
		if got := a.ask(t, c.req); !strings.HasPrefix(got, c.want) {
			t.Errorf("%q: got %q, want %q", strings.SplitN(c.req, "\n", 2)[0], got, c.want)
		}
	}
	hs.SetServingStatus("web", healthpb.HealthCheckResponse_SERVING)
	if got := a.ask(t, grpcReq(port, "web")); got != "ok SERVING" {
		t.Fatalf("after web turned SERVING: %q", got)
	}
}
