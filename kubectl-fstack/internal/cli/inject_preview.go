package cli

import (
	"fmt"
	"io"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	fsv1 "github.com/kube-fstack/kube-fstack/api/v1alpha1"
	"github.com/kube-fstack/kube-fstack/internal/inject"
)

// injector injects the pods of the manifests for one StackInstance. A stack whose port takes its
// address from a pool cannot be injected as the webhook injects it (the webhook claims an address
// for each pod): offline, every pod gets the placeholders (each pool's first address, what the
// stack's config renders with before a pod takes one), and the output says it is a preview.
type injector struct {
	prep *inject.Prepared
	si   *fsv1.StackInstance
	// placeholders are the addresses every pod gets, one per AddressNeeds entry; nil when the
	// stack has no pool (its pods serve its static addresses, as in the cluster).
	placeholders []netip.Addr
	// pools name each pool's field and its placeholder, for the messages.
	pools []string
	// previews counts the pods injected with placeholders.
	previews int
}

func newInjector(prep *inject.Prepared, si *fsv1.StackInstance) *injector {
	inj := &injector{prep: prep, si: si}
	first := prep.FirstAddresses()
	for i, n := range prep.AddressNeeds() {
		if n.Pool != nil {
			inj.pools = append(inj.pools, fmt.Sprintf("%s %s", n.Field, first[i]))
		}
	}
	if len(inj.pools) > 0 {
		inj.placeholders = first
	}
	return inj
}

// inject injects one pod as the webhook would, with the placeholders for a pool's address.
func (inj *injector) inject(pod *corev1.Pod) (*corev1.Pod, inject.Decision, error) {
	if inj.placeholders == nil {
		return inj.prep.Inject(pod)
	}
	out, d, err := inj.prep.InjectAddresses(pod, inj.placeholders)
	if err == nil && d == inject.Injected {
		inj.previews++
	}
	return out, d, err
}

// comment is put above each document with a pod injected with the placeholders: the file says
// what it is wherever it is copied to.
func (inj *injector) comment() string {
	lines := []string{
		fmt.Sprintf("kubectl fstack inject: a preview. StackInstance %s gives each pod its own address from a pool,", inj.si.Name),
		"which only kube-fstack's admission webhook assigns; here every pod serves the pool's first address",
		fmt.Sprintf("as a placeholder (%s). Do not apply this to a cluster that runs kube-fstack:", strings.Join(inj.pools, ", ")),
		"its webhook claims the placeholder for the first pod that arrives with it and refuses every other",
		"replica. Apply the workload as written: the webhook gives each pod its own.",
	}
	return "# " + strings.Join(lines, "\n# ") + "\n"
}

// warn says on stderr, once, that pods were injected with placeholders.
func (inj *injector) warn(stderr io.Writer) {
	if inj.previews == 0 {
		return
	}
	fmt.Fprintf(stderr, "warning: StackInstance %s gives each pod its own address from a pool, which only the admission webhook assigns: "+
		"the %d pod template(s) injected serve the pool's first address as a placeholder (%s); this output is a preview, "+
		"do not apply it to a cluster that runs kube-fstack: apply the workload as written and the webhook gives each pod its own address\n",
		safe(inj.si.Name), inj.previews, strings.Join(inj.pools, ", "))
}
