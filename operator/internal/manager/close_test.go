package manager

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Every webhook response closes its connection, so no idle keep-alive connection to a replica
// outlives the call: the client's next call dials again and reaches a live endpoint.
func TestWebhookResponsesCloseTheirConnection(t *testing.T) {
	srv := httptest.NewServer(closeAfterResponse(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})))
	defer srv.Close()
	resp, err := srv.Client().Post(srv.URL, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	// net/http moves the response's Connection: close into resp.Close.
	if !resp.Close {
		t.Fatal("the response keeps its connection alive")
	}
}
