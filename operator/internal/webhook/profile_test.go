package webhook

import (
	"context"
	"strings"
	"testing"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/test/fixtures"
)

// A Proxy profile whose spec lists no upstreams is admitted with a warning saying the [rss_check]
// table needs them; with upstreams, or another profile, nothing is said.
func TestProfileWarnings(t *testing.T) {
	v := &StackInstanceValidator{}
	ctx := context.Background()
	upstreams := []fsv1.RSSCheckEntry{{Port: "data", LocalAddress: "10.99.0.10", RemoteAddress: "10.99.1.10", RemotePort: 80}}
	cases := []struct {
		name    string
		profile fsv1.Profile
		entries []fsv1.RSSCheckEntry
		warn    bool
	}{
		{"proxy without upstreams", fsv1.ProfileProxy, nil, true},
		{"proxy with upstreams", fsv1.ProfileProxy, upstreams, false},
		{"short connections", fsv1.ProfileShortConnections, nil, false},
		{"proxy with the table off explicitly", fsv1.ProfileProxy, []fsv1.RSSCheckEntry{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			si := fixtures.Stack(t, "vhost-user")
			si.Spec.Profile = tc.profile
			switch {
			case len(tc.entries) > 0:
				si.Spec.RSSCheck = &fsv1.RSSCheckSpec{Entries: tc.entries}
			case tc.entries != nil:
				off := false
				si.Spec.RSSCheck = &fsv1.RSSCheckSpec{Enabled: &off}
			}
			created, err := v.ValidateCreate(ctx, si)
			if err != nil {
				t.Fatal(err)
			}
			updated, err := v.ValidateUpdate(ctx, si.DeepCopy(), si)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range [][]string{created, updated} {
				got := len(w) == 1 && strings.HasPrefix(w[0], "spec.profile: Proxy leaves [rss_check] enable unset: spec.rssCheck.entries lists no upstreams")
				if got != tc.warn || (!tc.warn && len(w) > 0) {
					t.Errorf("warnings %q, want the upstreams warning: %v", w, tc.warn)
				}
			}
		})
	}
}
