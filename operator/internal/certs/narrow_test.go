package certs

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Lists and watches of the namespace's Secrets ask for the certificate's name; a request that
// names its own selector, another collection or one object goes out as it was.
func TestSecretByNameNarrowsOnlySecretCollections(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.Path+"?"+r.URL.RawQuery)
	}))
	defer srv.Close()
	rt := &secretByName{next: http.DefaultTransport, collection: "/api/v1/namespaces/ns/secrets", selector: "metadata.name=cert"}
	for _, path := range []string{
		"/api/v1/namespaces/ns/secrets?limit=500",
		"/api/v1/namespaces/ns/secrets?watch=true&resourceVersion=1",
		"/api/v1/namespaces/ns/secrets?fieldSelector=metadata.name%3Dother",
		"/api/v1/namespaces/ns/secrets/cert",
		"/api/v1/namespaces/other/secrets",
		"/prefix/api/v1/namespaces/ns/secrets",
	} {
		req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if req.URL.RawQuery != "" && req.URL.Query().Get("fieldSelector") == "metadata.name=cert" {
			t.Fatal("the caller's request was changed")
		}
	}
	want := []string{
		"/api/v1/namespaces/ns/secrets?fieldSelector=metadata.name%3Dcert&limit=500",
		"/api/v1/namespaces/ns/secrets?fieldSelector=metadata.name%3Dcert&resourceVersion=1&watch=true",
		"/api/v1/namespaces/ns/secrets?fieldSelector=metadata.name%3Dother",
		"/api/v1/namespaces/ns/secrets/cert?",
		"/api/v1/namespaces/other/secrets?",
		"/prefix/api/v1/namespaces/ns/secrets?fieldSelector=metadata.name%3Dcert",
	}
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("requests sent:\n%q\nwant:\n%q", got, want)
		}
	}
}
